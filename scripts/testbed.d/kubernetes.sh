# shellcheck shell=bash
# A single-node Kubernetes with the agent-sandbox controller, for the
# Kubernetes vendor's tests: etcd, a containerd of its own, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet built from the
# kubernetes module (kube-build.sh), all on 127.0.0.1, identities from a
# self-made CA (kube-pki.sh). The node is `localhost`; pods sit on a bridge
# of their own with no masquerade (they reach nothing off the machine);
# kube-proxy, cluster DNS and a NetworkPolicy enforcer as a real cluster
# has them (kube-net.sh); reach a pod through the API (exec,
# port-forward). Box images come from the test bed's registry over plain
# HTTP; the pause image is built here and imported.
#
# Everything lives under $TB/kube; `down` stops the daemons by their pid
# files, the pods by the shims of this containerd, and removes the mounts,
# bridge and CNI state the test bed made (kube-down.sh).

KUBE_CONTAINERD=$KUBE/containerd
KUBE_CONTAINERD_SOCK=$RUN/kube-containerd.sock
KUBE_AUDIT_LOG=$KUBE/audit.log
KUBE_POD_SUBNET=10.244.0.0/24
KUBE_SERVICE_CIDR=10.96.0.0/24
KUBE_CNI_NET=boxctl-testbed
KUBE_CNI_BRIDGE=boxctl-cni0
# KUBE_CNI_BRIDGE_MAC: the bridge's own (locally administered) address.
KUBE_CNI_BRIDGE_MAC=02:b0:c7:0a:f4:01
KUBE_CNI_CONF=$KUBE/cni/net.d
KUBE_CNI_IPAM=$KUBE/cni/ipam

declare -A KUBE_EXE=(
	[kube-etcd]=/usr/bin/etcd
	[kube-containerd]=/usr/bin/containerd
	[kube-apiserver]=$BIN/kube-apiserver
	[kube-controller-manager]=$BIN/kube-controller-manager
	[kube-scheduler]=$BIN/kube-scheduler
	[kubelet]=$BIN/kubelet
	[agent-sandbox-controller]=$SANDBOX_CTRL_EXE
	[kube-localpv]=$LOCALPV_EXE
)

# KUBECTL_CACHE is the discovery cache of the test bed's kubectl (the
# tests' too, internal/kubetest): in the state directory, so that `up`
# can drop it when the served API versions change.
KUBECTL_CACHE=$KUBE/kubectl-cache

# kubectl_admin ARGS...: the built kubectl as the test bed's admin.
kubectl_admin() {
	"$KUBECTL" --kubeconfig="$ADMIN_KUBECONFIG" --cache-dir="$KUBECTL_CACHE" --request-timeout=10s "$@"
}

# kube_curl URL: GET URL with the admin's client certificate.
kube_curl() {
	curl -fsS -m 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$1"
}

kube_ports_up() {
	kube_port ETCD_PORT kube-etcd 2379
	kube_port ETCD_PEER_PORT kube-etcd 2380
	kube_port APISERVER_PORT kube-apiserver 6443
	kube_port KCM_PORT kube-controller-manager 10257
	kube_port SCHEDULER_PORT kube-scheduler 10259
	kube_port KUBELET_PORT kubelet 10250
	kube_port KUBELET_HEALTHZ_PORT kubelet 10248
	kube_port SANDBOX_METRICS_PORT agent-sandbox-controller 8480
	kube_port SANDBOX_PROBE_PORT agent-sandbox-controller 8481
	kube_port LOCALPV_PORT kube-localpv 8482
	APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
}

# --- etcd

etcd_healthy() {
	curl -fsS -m 3 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'
}

etcd_up() {
	mkdir -p "$KUBE/etcd"
	chmod 700 "$KUBE/etcd"
	kube_daemon kube-etcd etcd_healthy 60 "http://127.0.0.1:$ETCD_PORT, data $KUBE/etcd" \
		--name=testbed \
		--data-dir="$KUBE/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="testbed=http://127.0.0.1:$ETCD_PEER_PORT" \
		--logger=zap --log-level=warn
}

# --- containerd, CNI and the pause image

# pod_subnet_check: no route but the pods' bridge covers the pod subnet
# (Docker's networks, say).
pod_subnet_check() {
	ip -4 route show | testbedctl pod-subnet-check -subnet "$KUBE_POD_SUBNET" -bridge "$KUBE_CNI_BRIDGE" ||
		die "the pod subnet $KUBE_POD_SUBNET is not free"
}

kube_cni_up() {
	pod_subnet_check
	mkdir -p "$KUBE_CNI_CONF" "$KUBE_CNI_IPAM"
	testbedctl cni-conf -dir "$KUBE_CNI_CONF" -network "$KUBE_CNI_NET" -bridge "$KUBE_CNI_BRIDGE" \
		-subnet "$KUBE_POD_SUBNET" -ipam-dir "$KUBE_CNI_IPAM" || die "writing the CNI configuration failed"
}

# pause_image_up: build the pause image (the static pause binary alone,
# FROM scratch) as an archive once per binary; sets PAUSE_IMAGE, tagged by
# what it holds, in the test bed's registry: the kubelet deletes unused
# images under disk pressure, the pause image among them (containerd 1.6
# pins none), and containerd pulls it again from there.
pause_image_up() {
	local key dir=$CACHE/pause
	key=$(printf '%s\n' "$(sha256sum <"$PAUSE_EXE")" "$(declare -f pause_image_up)" | sha256sum | cut -c1-12)
	PAUSE_IMAGE=$REGISTRY/boxctl/pause:$key
	PAUSE_TAR=$dir/pause-$key.tar
	[[ -f $PAUSE_TAR ]] && return 0
	rm -rf "$dir"
	mkdir -p "$dir/root"
	cp "$PAUSE_EXE" "$dir/root/pause"
	chmod 755 "$dir/root/pause"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir/root" -cf "$dir/layer.tar" pause
	testbedctl save-image -layer "$dir/layer.tar" -ref "$PAUSE_IMAGE" -entrypoint /pause -out "$PAUSE_TAR.tmp" 2>>"$LOGS/kube-pause.log" ||
		{ logtail "$LOGS/kube-pause.log"; die "building the pause image failed (log: $LOGS/kube-pause.log)"; }
	mv "$PAUSE_TAR.tmp" "$PAUSE_TAR"
	rm -rf "$dir/root" "$dir/layer.tar"
}

# kctr ARGS...: ctr on the test bed's containerd, namespace k8s.io.
kctr() {
	ctr -a "$KUBE_CONTAINERD_SOCK" -n k8s.io "$@"
}

containerd_healthy() {
	kctr plugins ls 2>/dev/null | awk '$2 == "cri" { found = 1; ok = ($4 == "ok") } END { exit !(found && ok) }'
}

kube_containerd_up() {
	local conf=$KUBE_CONTAINERD/config.toml
	mkdir -p "$KUBE_CONTAINERD/root" "$KUBE_CONTAINERD/state" "$KUBE_CONTAINERD/certs.d/$REGISTRY"
	write_if_changed "$KUBE_CONTAINERD/certs.d/$REGISTRY/hosts.toml" <<-TOML
		# written by scripts/testbed: the test bed's registry, plain HTTP
		server = "http://$REGISTRY"
		[host."http://$REGISTRY"]
		  capabilities = ["pull", "resolve"]
	TOML
	write_if_changed "$conf" <<-TOML
		# written by scripts/testbed: the test bed's Kubernetes runtime, apart
		# from the system's and Docker's containerd
		version = 2
		root = "$KUBE_CONTAINERD/root"
		state = "$KUBE_CONTAINERD/state"
		[grpc]
		  address = "$KUBE_CONTAINERD_SOCK"
		[ttrpc]
		  address = "$KUBE_CONTAINERD_SOCK.ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$KUBE_CONTAINERD/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  restrict_oom_score_adj = true
		  netns_mounts_under_state_dir = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  disable_apparmor = true
		  enable_unprivileged_icmp = true
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        BinaryName = "/usr/sbin/runc"
		        SystemdCgroup = false
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$KUBE_CNI_CONF"
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$KUBE_CONTAINERD/certs.d"
	TOML
	kube_daemon kube-containerd containerd_healthy 60 "unix://$KUBE_CONTAINERD_SOCK" --config="$conf"
	local images
	images=$(kctr images ls -q 2>/dev/null) || true
	if ! grep -qxF "$PAUSE_IMAGE" <<<"$images"; then
		kctr images import "$PAUSE_TAR" >>"$LOGS/kube-pause.log" 2>&1 ||
			{ logtail "$LOGS/kube-pause.log"; die "ctr images import $PAUSE_TAR failed (log: $LOGS/kube-pause.log)"; }
		images=$(kctr images ls -q) || die "ctr images ls failed"
		grep -qxF "$PAUSE_IMAGE" <<<"$images" || die "ctr imported $PAUSE_TAR but lists no $PAUSE_IMAGE"
		report pause imported "$PAUSE_IMAGE"
	fi
	local repo=${PAUSE_IMAGE#"$REGISTRY"/} tag=${PAUSE_IMAGE##*:}
	if ! curl -fsS -m 5 -o /dev/null -I -H "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json" \
		"http://$REGISTRY/v2/${repo%:*}/manifests/$tag"; then
		kctr images push --plain-http "$PAUSE_IMAGE" >>"$LOGS/kube-pause.log" 2>&1 ||
			{ logtail "$LOGS/kube-pause.log"; die "pushing $PAUSE_IMAGE to the test bed's registry failed (log: $LOGS/kube-pause.log)"; }
		report pause pushed "$PAUSE_IMAGE"
	fi
}

# --- the control plane

# audit_policy: RequestResponse for pods, their exec, attach and
# port-forward and for every agent-sandbox resource; Metadata for the rest.
audit_policy() {
	write_if_changed "$KUBE/audit-policy.yaml" <<-YAML
		# written by scripts/testbed
		apiVersion: audit.k8s.io/v1
		kind: Policy
		omitStages: [RequestReceived]
		rules:
		- level: RequestResponse
		  resources:
		  - group: ""
		    resources: [pods, pods/exec, pods/portforward, pods/attach]
		  - group: agents.x-k8s.io
		  - group: extensions.agents.x-k8s.io
		- level: Metadata
	YAML
}

apiserver_healthy() {
	[[ $(kube_curl "$APISERVER_URL/readyz") == ok ]]
}

apiserver_up() {
	audit_policy
	kube_daemon kube-apiserver apiserver_healthy 120 "$APISERVER_URL" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 \
		--secure-port="$APISERVER_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" \
		--tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--service-cluster-ip-range="$KUBE_SERVICE_CIDR" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$PKI/sa.pub" \
		--service-account-signing-key-file="$PKI/sa.key" \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$PKI/ca.crt" \
		--kubelet-preferred-address-types=Hostname \
		--endpoint-reconciler-type=none \
		--allow-privileged=true \
		--audit-policy-file="$KUBE/audit-policy.yaml" \
		--audit-log-path="$KUBE_AUDIT_LOG" \
		--audit-log-maxsize=200 \
		--audit-log-maxbackup=1 \
		--profiling=false
}

crds_established() {
	kubectl_admin wait --for=condition=Established --timeout=5s -f "$SANDBOX_CRDS"
}

# crds_replace_stale: delete each agent-sandbox CRD of the cluster that
# still stores a version the new CRDs do not serve (v1alpha1 under a
# v1beta1-only release), objects and all: the API server refuses to drop a
# stored version, and the test bed keeps no boxes across an upgrade. A CRD
# that serves what it stores is left alone.
crds_replace_stale() {
	local f out name versions stored s
	for f in "$SANDBOX_CRDS"/*.yaml; do
		out=$(kubectl_admin create --dry-run=client --validate=false -o 'jsonpath={.metadata.name}{" "}{.spec.versions[*].name}' -f "$f") ||
			die "reading $f failed"
		read -r name versions <<<"$out"
		[[ -n $name && -n $versions ]] || die "$f names no CRD and versions"
		stored=$(kubectl_admin get crd "$name" --ignore-not-found -o 'jsonpath={.status.storedVersions[*]}') ||
			die "reading CRD $name failed"
		for s in $stored; do
			if [[ " $versions " != *" $s "* ]]; then
				echo "testbed: replacing CRD $name: it stores $s, $AGENT_SANDBOX_VERSION serves $versions" >&2
				kubectl_admin delete crd "$name" --wait=true --timeout=120s >>"$LOGS/kube-crds.log" 2>&1 ||
					{ logtail "$LOGS/kube-crds.log"; die "deleting CRD $name failed (log: $LOGS/kube-crds.log)"; }
				# kubectl would ask for the old version from its cache.
				rm -rf "$KUBECTL_CACHE"
				break
			fi
		done
	done
}

# crds_up: the agent-sandbox CRDs, applied server-side (they are too big for
# the last-applied annotation) before kube-controller-manager starts, so its
# garbage collector maps Sandboxes from its first sync. Older CRDs whose
# stored versions the new ones drop are replaced (crds_replace_stale).
crds_up() {
	SANDBOX_CRDS=$(module_dir "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION")/k8s/crds
	crds_replace_stale
	kubectl_admin apply --server-side --force-conflicts --field-manager=boxctl-testbed -f "$SANDBOX_CRDS" >>"$LOGS/kube-crds.log" 2>&1 ||
		{ logtail "$LOGS/kube-crds.log"; die "applying the agent-sandbox CRDs failed (log: $LOGS/kube-crds.log)"; }
	kube_wait 60 "the agent-sandbox CRDs were not Established" crds_established
}

kcm_healthy() {
	[[ $(curl -fsS -m 3 -k "https://127.0.0.1:$KCM_PORT/healthz") == ok ]]
}

kcm_up() {
	mkdir -p "$KUBE/controller-manager"
	local kc=$KUBE/controller-manager.kubeconfig
	kube_daemon kube-controller-manager kcm_healthy 60 "https://127.0.0.1:$KCM_PORT" \
		--kubeconfig="$kc" \
		--authentication-kubeconfig="$kc" \
		--authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 \
		--secure-port="$KCM_PORT" \
		--cert-dir="$KUBE/controller-manager" \
		--leader-elect=false \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$PKI/sa.key" \
		--root-ca-file="$PKI/ca.crt" \
		--cluster-signing-cert-file="$PKI/ca.crt" \
		--cluster-signing-key-file="$PKI/ca.key" \
		--profiling=false
}

scheduler_healthy() {
	[[ $(curl -fsS -m 3 -k "https://127.0.0.1:$SCHEDULER_PORT/healthz") == ok ]]
}

scheduler_up() {
	local kc=$KUBE/scheduler.kubeconfig
	kube_daemon kube-scheduler scheduler_healthy 60 "https://127.0.0.1:$SCHEDULER_PORT" \
		--kubeconfig="$kc" \
		--authentication-kubeconfig="$kc" \
		--authorization-kubeconfig="$kc" \
		--bind-address=127.0.0.1 \
		--secure-port="$SCHEDULER_PORT" \
		--leader-elect=false \
		--profiling=false
}

# --- the node

kubelet_healthy() {
	[[ $(curl -fsS -m 3 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz") == ok ]]
}

# kubelet_config: cgroup v1 with cgroupfs, the own containerd, serving on
# 127.0.0.1 with clients checked against the CA, eviction and image GC
# thresholds low enough that a full-ish disk evicts nothing, no iptables
# chains of its own (kube-proxy makes those it needs), and the cluster's
# DNS (kube-net.sh).
kubelet_config() {
	write_if_changed "$KUBE/kubelet.yaml" <<-YAML
		# written by scripts/testbed
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: $KUBELET_PORT
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $KUBELET_HEALTHZ_PORT
		tlsCertFile: $PKI/kubelet.crt
		tlsPrivateKeyFile: $PKI/kubelet.key
		authentication:
		  anonymous:
		    enabled: false
		  webhook:
		    enabled: true
		  x509:
		    clientCAFile: $PKI/ca.crt
		authorization:
		  mode: Webhook
		failCgroupV1: false
		cgroupDriver: cgroupfs
		containerRuntimeEndpoint: unix://$KUBE_CONTAINERD_SOCK
		failSwapOn: false
		podLogsDir: $KUBE/pod-logs
		resolvConf: /etc/resolv.conf
		serializeImagePulls: false
		evictionHard:
		  memory.available: 50Mi
		  nodefs.available: 1%
		  nodefs.inodesFree: 1%
		  imagefs.available: 1%
		  imagefs.inodesFree: 1%
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		rotateCertificates: false
		serverTLSBootstrap: false
		makeIPTablesUtilChains: false
		clusterDNS: [$KUBE_DNS_IP]
		clusterDomain: $KUBE_CLUSTER_DOMAIN
	YAML
}

kubelet_up() {
	kubelet_config
	mkdir -p "$KUBE/kubelet" "$KUBE/pod-logs"
	kube_daemon kubelet kubelet_healthy 60 "node $KUBE_NODE, https://127.0.0.1:$KUBELET_PORT" \
		--config="$KUBE/kubelet.yaml" \
		--kubeconfig="$KUBE/kubelet.kubeconfig" \
		--hostname-override="$KUBE_NODE" \
		--root-dir="$KUBE/kubelet"
}

# --- agent-sandbox

sandbox_ctrl_healthy() {
	[[ $(curl -fsS -m 3 "http://127.0.0.1:$SANDBOX_PROBE_PORT/readyz") == ok ]]
}

sandbox_ctrl_up() {
	kube_daemon agent-sandbox-controller sandbox_ctrl_healthy 60 "$AGENT_SANDBOX_VERSION, probes http://127.0.0.1:$SANDBOX_PROBE_PORT" \
		--kubeconfig="$KUBE/agent-sandbox.kubeconfig" \
		--leader-elect=false \
		--extensions=true \
		--metrics-bind-address="127.0.0.1:$SANDBOX_METRICS_PORT" \
		--health-probe-bind-address="127.0.0.1:$SANDBOX_PROBE_PORT"
}

# --- storage

# The StorageClass suspendable boxes keep their disk on: the test bed's
# provisioner makes each volume a directory under $KUBE_VOLUMES, and a
# clone a copy of its source's.
KUBE_STORAGE_CLASS=boxctl-local
KUBE_VOLUMES=$KUBE/volumes

localpv_healthy() {
	[[ $(curl -fsS -m 3 "http://127.0.0.1:$LOCALPV_PORT/healthz") == ok ]]
}

localpv_up() {
	kube_daemon kube-localpv localpv_healthy 60 "class $KUBE_STORAGE_CLASS, volumes in $KUBE_VOLUMES" \
		-kubeconfig="$ADMIN_KUBECONFIG" \
		-root="$KUBE_VOLUMES" \
		-node="$KUBE_NODE" \
		-class="$KUBE_STORAGE_CLASS" \
		-health="127.0.0.1:$LOCALPV_PORT"
}

# --- the whole

node_ready() {
	[[ $(kubectl_admin get node "$KUBE_NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

default_sa() {
	kubectl_admin -n default get serviceaccount default
}

kube_up() {
	local t0=$SECONDS
	kube_bins_up
	kube_net_bins_up
	mkdir -p "$KUBE"
	kube_ports_up
	kube_net_ports_up
	kube_pki_up
	kube_kubeconfigs_up
	etcd_up
	kube_cni_up
	kube_bridge_up
	kube_relay_net_up
	kube_forward_up
	pause_image_up
	kube_containerd_up
	apiserver_up
	crds_up
	kcm_up
	scheduler_up
	# The kubelet registers the node, which kube-proxy and kube-router
	# wait for (kube-proxy answers its health check only once it exists).
	kubelet_up
	kube_proxy_up
	kube_router_up
	coredns_up
	sandbox_ctrl_up
	localpv_up
	kube_wait 120 "node $KUBE_NODE was not Ready" node_ready
	kube_wait 60 "the default service account was not made" default_sa
	report kubernetes ready "$ADMIN_KUBECONFIG (node $KUBE_NODE Ready, pods on $KUBE_POD_SUBNET, $((SECONDS - t0)) s)"
}

# kube_status: one # comment line per Kubernetes daemon, for `status`.
kube_status() {
	local n pid
	for n in kube-etcd kube-containerd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kube-router kube-coredns kubelet agent-sandbox-controller kube-localpv; do
		if pid=$(pid_of "$n" "${KUBE_EXE[$n]}"); then
			echo "# $n running (pid $pid)"
		else
			echo "# $n not running"
		fi
	done
}
