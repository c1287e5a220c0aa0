# shellcheck shell=bash
# The test bed's Kubernetes identities: one self-made CA, serving certs for
# the apiserver and the kubelet, a client cert per component, the service
# account key pair, and a kubeconfig per client, all made by the Go helper
# (testbedctl kube-pki, kubeconfig) with crypto/x509. A PKI that matches
# what the helper would make is kept; a kubeconfig is rewritten only when
# its content changes (and with it, the daemons that read it restart).

KUBE=$TB/kube
PKI=$KUBE/pki
KUBE_NODE=localhost
ADMIN_KUBECONFIG=$KUBE/admin.kubeconfig

# kube_pki_up: make the PKI unless it is there, matching.
kube_pki_up() {
	testbedctl kube-pki -dir "$PKI" -node "$KUBE_NODE" -service-cidr "$KUBE_SERVICE_CIDR" >>"$LOGS/kube-pki.log" 2>&1 ||
		{ logtail "$LOGS/kube-pki.log"; die "making the Kubernetes PKI failed (log: $LOGS/kube-pki.log)"; }
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

# kube_kubeconfig FILE USER: a kubeconfig at FILE for the client whose key
# and certificate are USER.key and USER.crt in the PKI, speaking to the
# apiserver at $APISERVER_URL and trusting the CA.
kube_kubeconfig() {
	testbedctl kubeconfig -pki "$PKI" -server "$APISERVER_URL" -user "$2" -out "$1" ||
		die "writing the kubeconfig $1 failed"
}

kube_kubeconfigs_up() {
	kube_kubeconfig "$ADMIN_KUBECONFIG" admin
	kube_kubeconfig "$KUBE/controller-manager.kubeconfig" controller-manager
	kube_kubeconfig "$KUBE/scheduler.kubeconfig" scheduler
	kube_kubeconfig "$KUBE/kubelet.kubeconfig" node
	kube_kubeconfig "$KUBE/agent-sandbox.kubeconfig" agent-sandbox
}
