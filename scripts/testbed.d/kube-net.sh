# shellcheck shell=bash
# What a real cluster's network has beside the pods' bridge, so that the
# Kubernetes vendor's egress confinement is tested for real:
# - kube-proxy (built with the control plane, kube-build.sh) in iptables
#   mode: Services reach their endpoints;
# - CoreDNS, built from its module with the plugins a cluster's DNS uses,
#   on the pods' gateway behind the kube-dns Service: cluster DNS;
# - kube-router in firewall-only mode: NetworkPolicies enforced, on
#   traffic between pods and on pods' traffic to this node;
# - the egress relays' range: KUBE_RELAY_NET is local to this machine (a
#   local route on lo), so that each test process's egress gate (a
#   vendors/egress/gate without a bridge) binds an address of its own
#   there, which the pods reach through their gateway.
# IPv6 is off in the pods and on their bridge: the cluster is IPv4 only,
# and its NetworkPolicy enforcer does not see IPv6.

KUBE_ROUTER_VERSION=v2.1.0
COREDNS_VERSION=v1.15.0
KUBE_DNS_IP=10.96.0.10
KUBE_CLUSTER_DOMAIN=cluster.local
KUBE_GATEWAY=10.244.0.1
KUBE_RELAY_NET=10.99.0.0/28
KUBE_ROUTER_EXE=$BIN/kube-router
COREDNS_EXE=$BIN/coredns

KUBE_EXE+=(
	[kube-proxy]=$BIN/kube-proxy
	[kube-router]=$KUBE_ROUTER_EXE
	[kube-coredns]=$COREDNS_EXE
)

# coredns_src_edit DIR: CoreDNS with the plugins of a cluster's DNS (the
# default Corefile of kubeadm's, and bind) and no others: the build links
# none of the cloud providers' SDKs.
coredns_src_edit() {
	local d=$1 p
	[[ -f $d/core/plugin/zplugin.go ]] || die "coredns: no core/plugin/zplugin.go in $d"
	{
		echo '// Package plugin links the test bed'"'"'s CoreDNS plugins.'
		echo 'package plugin'
		echo
		echo 'import ('
		echo '	_ "github.com/coredns/caddy/onevent"'
		for p in bind cache errors forward health kubernetes loadbalance log loop metrics ready reload; do
			echo "	_ \"github.com/coredns/coredns/plugin/$p\""
		done
		echo ')'
	} >"$d/core/plugin/zplugin.go"
}

# kube_router_src_edit DIR: kube-router builds as it is.
kube_router_src_edit() {
	[[ -f $1/cmd/kube-router/kube-router.go ]] || die "kube-router: no cmd/kube-router in $1"
}

# kube_net_bins_up: build kube-router and CoreDNS unless their stamps say
# they are built from what they would be now.
kube_net_bins_up() {
	local gover how=reused t0=$SECONDS stamp src
	gover=$(go env GOVERSION)
	stamp=$(printf '%s\n' "$KUBE_ROUTER_VERSION" "$gover" "$(declare -f kube_router_src_edit gobuild)" | sha256sum | cut -c1-64)
	if ! stamp_ok kube-router "$stamp"; then
		how=built
		echo "testbed: building kube-router $KUBE_ROUTER_VERSION (log: $LOGS/kube-router-build.log; minutes when cold)" >&2
		src=$CACHE/kube-router-src-$KUBE_ROUTER_VERSION
		writable_copy "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION" "$src" kube_router_src_edit
		gobuild "$src" "$LOGS/kube-router-build.log" "$KUBE_ROUTER_EXE.new" "-s -w" ./cmd/kube-router
		mv -f "$KUBE_ROUTER_EXE.new" "$KUBE_ROUTER_EXE"
		printf '%s\n' "$stamp" >"$KUBE_ROUTER_EXE.stamp"
	fi
	stamp=$(printf '%s\n' "$COREDNS_VERSION" "$gover" "$(declare -f coredns_src_edit gobuild)" | sha256sum | cut -c1-64)
	if ! stamp_ok coredns "$stamp"; then
		how=built
		echo "testbed: building CoreDNS $COREDNS_VERSION (log: $LOGS/coredns-build.log)" >&2
		src=$CACHE/coredns-src-$COREDNS_VERSION
		writable_copy "github.com/coredns/coredns@$COREDNS_VERSION" "$src" coredns_src_edit
		gobuild "$src" "$LOGS/coredns-build.log" "$COREDNS_EXE.new" "-s -w" .
		mv -f "$COREDNS_EXE.new" "$COREDNS_EXE"
		printf '%s\n' "$stamp" >"$COREDNS_EXE.stamp"
	fi
	report kube-net-bin "$how" "kube-router $KUBE_ROUTER_VERSION, CoreDNS $COREDNS_VERSION$([[ $how == built ]] && echo ", $((SECONDS - t0)) s")"
}

kube_net_ports_up() {
	kube_port KUBE_PROXY_HEALTH_PORT kube-proxy 10256
	kube_port KUBE_PROXY_METRICS_PORT kube-proxy 10249
	kube_port KUBE_ROUTER_HEALTH_PORT kube-router 20244
	kube_port COREDNS_HEALTH_PORT kube-coredns 8483
	kube_port COREDNS_READY_PORT kube-coredns 8484
}

# kube_bridge_up: the pods' bridge with its gateway address and no IPv6,
# made before the first pod (the CNI bridge plugin takes it as it is) so
# that CoreDNS can listen on the gateway from the start.
kube_bridge_up() {
	# Traffic between pods on the bridge goes through netfilter, where
	# the NetworkPolicy enforcer and the FORWARD rule below see it.
	modprobe br_netfilter 2>/dev/null || true
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 ||
		die "bridged traffic does not reach iptables (br_netfilter): NetworkPolicies between pods would not hold"
	if ! ip link show "$KUBE_CNI_BRIDGE" >/dev/null 2>&1; then
		ip link add "$KUBE_CNI_BRIDGE" type bridge || die "making the bridge $KUBE_CNI_BRIDGE failed"
	fi
	# A bridge without an address of its own takes its lowest port's, and
	# changes it as pods come and go: the pods' neighbour entries for the
	# gateway then name an address nobody answers to, and their traffic to
	# this node stalls until the entries expire (30 to 60 s). A set address
	# stays.
	if [[ $(cat "/sys/class/net/$KUBE_CNI_BRIDGE/addr_assign_type") != 3 ]]; then
		ip link set "$KUBE_CNI_BRIDGE" address "$KUBE_CNI_BRIDGE_MAC" || die "setting the address of $KUBE_CNI_BRIDGE failed"
	fi
	sysctl -qw "net.ipv6.conf.$KUBE_CNI_BRIDGE.disable_ipv6=1" || die "turning IPv6 off on $KUBE_CNI_BRIDGE failed"
	if [[ -z $(ip -4 -o addr show dev "$KUBE_CNI_BRIDGE" to "$KUBE_GATEWAY/32") ]]; then
		ip addr add "$KUBE_GATEWAY/${KUBE_POD_SUBNET#*/}" dev "$KUBE_CNI_BRIDGE" || die "adding $KUBE_GATEWAY to $KUBE_CNI_BRIDGE failed"
	fi
	ip link set "$KUBE_CNI_BRIDGE" up || die "bringing $KUBE_CNI_BRIDGE up failed"
}

# kube_relay_net_up: KUBE_RELAY_NET local to this machine.
kube_relay_net_up() {
	if [[ -z $(ip route show table local type local exact "$KUBE_RELAY_NET" dev lo) ]]; then
		ip route add local "$KUBE_RELAY_NET" dev lo table local || die "making $KUBE_RELAY_NET local failed"
	fi
}

kube_proxy_healthy() {
	curl -fsS -m 3 -o /dev/null "http://127.0.0.1:$KUBE_PROXY_HEALTH_PORT/healthz"
}

kube_proxy_up() {
	write_if_changed "$KUBE/kube-proxy.yaml" <<-YAML
		# written by scripts/testbed
		apiVersion: kubeproxy.config.k8s.io/v1alpha1
		kind: KubeProxyConfiguration
		clientConnection:
		  kubeconfig: $ADMIN_KUBECONFIG
		mode: iptables
		clusterCIDR: $KUBE_POD_SUBNET
		hostnameOverride: $KUBE_NODE
		healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTH_PORT
		metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
		nodePortAddresses: [primary]
		iptables:
		  localhostNodePorts: false
		conntrack:
		  maxPerCore: 0
		  tcpEstablishedTimeout: 0s
		  tcpCloseWaitTimeout: 0s
	YAML
	kube_daemon kube-proxy kube_proxy_healthy 60 "iptables mode, Services of $KUBE_SERVICE_CIDR" \
		--config="$KUBE/kube-proxy.yaml"
}

kube_router_healthy() {
	curl -fsS -m 3 -o /dev/null "http://127.0.0.1:$KUBE_ROUTER_HEALTH_PORT/healthz"
}

kube_router_up() {
	kube_daemon kube-router kube_router_healthy 60 "$KUBE_ROUTER_VERSION, NetworkPolicies only" \
		--kubeconfig="$ADMIN_KUBECONFIG" \
		--hostname-override="$KUBE_NODE" \
		--run-firewall=true \
		--run-router=false \
		--run-service-proxy=false \
		--enable-ipv4=true \
		--enable-ipv6=false \
		--service-cluster-ip-range="$KUBE_SERVICE_CIDR" \
		--health-port="$KUBE_ROUTER_HEALTH_PORT" \
		--metrics-port=0
}

coredns_healthy() {
	[[ $(curl -fsS -m 3 "http://127.0.0.1:$COREDNS_READY_PORT/ready") == OK ]]
}

# kube_dns_service_up: the kube-dns Service, without a selector: its one
# endpoint is CoreDNS on the pods' gateway.
kube_dns_service_up() {
	kubectl_admin apply --server-side --force-conflicts --field-manager=boxctl-testbed -f - >>"$LOGS/kube-dns.log" 2>&1 <<-YAML ||
		apiVersion: v1
		kind: Service
		metadata:
		  name: kube-dns
		  namespace: kube-system
		  labels: {k8s-app: kube-dns}
		spec:
		  clusterIP: $KUBE_DNS_IP
		  ports:
		  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
		  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
		---
		apiVersion: discovery.k8s.io/v1
		kind: EndpointSlice
		metadata:
		  name: kube-dns-node
		  namespace: kube-system
		  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: boxctl-testbed}
		addressType: IPv4
		endpoints:
		- addresses: [$KUBE_GATEWAY]
		  conditions: {ready: true}
		  nodeName: $KUBE_NODE
		ports:
		- {name: dns, port: 53, protocol: UDP}
		- {name: dns-tcp, port: 53, protocol: TCP}
	YAML
		{ logtail "$LOGS/kube-dns.log"; die "applying the kube-dns Service failed (log: $LOGS/kube-dns.log)"; }
}

coredns_up() {
	write_if_changed "$KUBE/Corefile" <<-COREFILE
		# written by scripts/testbed
		.:53 {
		    bind $KUBE_GATEWAY
		    errors
		    health 127.0.0.1:$COREDNS_HEALTH_PORT
		    ready 127.0.0.1:$COREDNS_READY_PORT
		    kubernetes $KUBE_CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
		        kubeconfig $ADMIN_KUBECONFIG
		        pods insecure
		        fallthrough in-addr.arpa ip6.arpa
		        ttl 30
		    }
		    forward . /etc/resolv.conf
		    cache 30
		    loop
		    loadbalance
		}
	COREFILE
	kube_daemon kube-coredns coredns_healthy 60 "$COREDNS_VERSION on $KUBE_GATEWAY:53, Service $KUBE_DNS_IP" \
		-conf "$KUBE/Corefile"
	kube_dns_service_up
}

# KUBE_FORWARD_RULE lets pods reach pods (a Service's endpoints among
# them) through this machine, appended after Docker's rules so that the
# NetworkPolicy enforcer's, which it keeps first, decide first. Nothing
# else of the pods' is forwarded: they reach nothing off the machine.
KUBE_FORWARD_RULE=(-i "$KUBE_CNI_BRIDGE" -o "$KUBE_CNI_BRIDGE" -s "$KUBE_POD_SUBNET" -d "$KUBE_POD_SUBNET"
	-m comment --comment "boxctl-testbed: pod to pod" -j ACCEPT)

kube_forward_up() {
	iptables -w -C FORWARD "${KUBE_FORWARD_RULE[@]}" 2>/dev/null ||
		iptables -w -A FORWARD "${KUBE_FORWARD_RULE[@]}" || die "adding the pods' FORWARD rule failed"
}

# kube_net_rules_down: what kube-proxy, kube-router and the test bed put in
# the kernel for the cluster, once their daemons are stopped.
kube_net_rules_down() {
	# Only what the test bed's own daemons made (their spec files say they
	# ran): their cleanups remove every chain of their kind on the host.
	if [[ -x ${KUBE_EXE[kube-proxy]} && -f $RUN/kube-proxy.spec ]]; then
		"${KUBE_EXE[kube-proxy]}" --cleanup >>"$LOGS/kube-proxy.log" 2>&1 || true
		rm -f "$RUN/kube-proxy.spec"
	fi
	if [[ -x $KUBE_ROUTER_EXE && -f $RUN/kube-router.spec ]]; then
		"$KUBE_ROUTER_EXE" --cleanup-config >>"$LOGS/kube-router.log" 2>&1 || true
		rm -f "$RUN/kube-router.spec"
	fi
	while iptables -w -D FORWARD "${KUBE_FORWARD_RULE[@]}" 2>/dev/null; do :; done
	ip route del local "$KUBE_RELAY_NET" dev lo table local 2>/dev/null || true
	return 0
}
