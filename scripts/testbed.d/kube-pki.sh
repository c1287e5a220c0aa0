# shellcheck shell=bash
# The test bed's Kubernetes identities: one self-made CA, serving certs for
# the apiserver and the kubelet, a client cert per component, the service
# account key pair, and a kubeconfig per client. Made with openssl once per
# recipe (a change of the recipe below makes them all again, and with them
# every component restarts, since their configs change).

KUBE=$TB/kube
PKI=$KUBE/pki
KUBE_SERVICE_IP=10.96.0.1 # the `kubernetes` Service: the first address of KUBE_SERVICE_CIDR
KUBE_NODE=localhost
ADMIN_KUBECONFIG=$KUBE/admin.kubeconfig

# kube_cert NAME SUBJECT USAGE [SAN]: a P-256 key and a certificate signed
# by the CA, valid ten years, in $1.key and $1.crt of the directory in the
# PKI_OUT variable. USAGE is serverAuth or clientAuth.
kube_cert() {
	local name=$1 subj=$2 usage=$3 san=${4:-} ext
	ext=$(
		printf '%s\n' "basicConstraints=critical,CA:FALSE" \
			"keyUsage=critical,digitalSignature,keyEncipherment" \
			"extendedKeyUsage=$usage"
		if [[ -n $san ]]; then
			printf 'subjectAltName=%s\n' "$san"
		fi
	)
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI_OUT/$name.key" -subj "$subj" 2>>"$LOGS/kube-pki.log" |
		openssl x509 -req -CA "$PKI_OUT/ca.crt" -CAkey "$PKI_OUT/ca.key" \
			-set_serial "0x$(openssl rand -hex 16)" -days 3650 \
			-extfile <(printf '%s\n' "$ext") -out "$PKI_OUT/$name.crt" 2>>"$LOGS/kube-pki.log" ||
		{ logtail "$LOGS/kube-pki.log"; die "openssl: certificate $name failed (log: $LOGS/kube-pki.log)"; }
}

# kube_pki_make: every key and certificate, into PKI_OUT.
kube_pki_make() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI_OUT/ca.key" -out "$PKI_OUT/ca.crt" -days 3650 \
		-subj "/CN=boxctl-testbed-ca" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>>"$LOGS/kube-pki.log" ||
		{ logtail "$LOGS/kube-pki.log"; die "openssl: the CA failed (log: $LOGS/kube-pki.log)"; }
	kube_cert apiserver "/CN=kube-apiserver" serverAuth \
		"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$KUBE_SERVICE_IP"
	kube_cert kubelet "/CN=$KUBE_NODE" serverAuth "DNS:$KUBE_NODE,IP:127.0.0.1"
	kube_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	kube_cert admin "/O=system:masters/CN=boxctl-testbed-admin" clientAuth
	kube_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
	kube_cert scheduler "/CN=system:kube-scheduler" clientAuth
	kube_cert node "/O=system:nodes/CN=system:node:$KUBE_NODE" clientAuth
	kube_cert agent-sandbox "/O=system:masters/CN=agent-sandbox-controller" clientAuth
	if ! openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI_OUT/sa.key" 2>>"$LOGS/kube-pki.log" ||
		! openssl pkey -in "$PKI_OUT/sa.key" -pubout -out "$PKI_OUT/sa.pub" 2>>"$LOGS/kube-pki.log"; then
		logtail "$LOGS/kube-pki.log"
		die "openssl: the service account key failed (log: $LOGS/kube-pki.log)"
	fi
	chmod 600 "$PKI_OUT"/*.key
}

# kube_pki_up: make the PKI unless it is there from the same recipe.
kube_pki_up() {
	local key
	key=$(printf '%s\n' "$KUBE_NODE" "$KUBE_SERVICE_IP" "$(declare -f kube_cert kube_pki_make)" | sha256sum | cut -c1-64)
	if [[ -f $PKI/.recipe && $(<"$PKI/.recipe") == "$key" && -f $PKI/ca.crt && -f $PKI/sa.pub ]]; then
		return 0
	fi
	rm -rf "$PKI.tmp"
	mkdir -p "$PKI.tmp"
	chmod 700 "$PKI.tmp"
	PKI_OUT=$PKI.tmp kube_pki_make
	printf '%s\n' "$key" >"$PKI.tmp/.recipe"
	rm -rf "$PKI"
	mv "$PKI.tmp" "$PKI"
}

# write_if_changed FILE: FILE gets stdin unless it already holds exactly that.
write_if_changed() {
	local content
	content=$(cat)
	if [[ -f $1 && $(<"$1") == "$content" ]]; then
		return 0
	fi
	printf '%s\n' "$content" >"$1.tmp"
	mv -f "$1.tmp" "$1"
}

# kube_kubeconfig FILE CERT: a kubeconfig at FILE for the client whose key
# and certificate are CERT.key and CERT.crt in the PKI, speaking to the
# apiserver at $APISERVER_URL and trusting the CA.
kube_kubeconfig() {
	local file=$1 user=$2
	write_if_changed "$file" <<-KUBECONFIG
		# written by scripts/testbed
		apiVersion: v1
		kind: Config
		clusters:
		- name: testbed
		  cluster:
		    server: $APISERVER_URL
		    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
		users:
		- name: $user
		  user:
		    client-certificate-data: $(base64 -w0 <"$PKI/$user.crt")
		    client-key-data: $(base64 -w0 <"$PKI/$user.key")
		contexts:
		- name: testbed
		  context:
		    cluster: testbed
		    user: $user
		    namespace: default
		current-context: testbed
	KUBECONFIG
	chmod 600 "$file"
}

kube_kubeconfigs_up() {
	kube_kubeconfig "$ADMIN_KUBECONFIG" admin
	kube_kubeconfig "$KUBE/controller-manager.kubeconfig" controller-manager
	kube_kubeconfig "$KUBE/scheduler.kubeconfig" scheduler
	kube_kubeconfig "$KUBE/kubelet.kubeconfig" node
	kube_kubeconfig "$KUBE/agent-sandbox.kubeconfig" agent-sandbox
}
