# shellcheck shell=bash
# Taking the test bed's Kubernetes down: the daemons by their pid files,
# kubelet first and etcd last; the pods by the shims of the test bed's own
# containerd (never Docker's or the system's); then the mounts, network
# namespaces, bridge, address leases and CNI cache entries they left, all
# of them the test bed's by path or name.

# kube_shims: the pids of the containerd shims of the test bed's containerd
# (their -address is its socket).
kube_shims() {
	local d exe cmd
	for d in /proc/[0-9]*; do
		exe=$(readlink "$d/exe" 2>/dev/null) || continue
		[[ $exe == */containerd-shim* ]] || continue
		cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
		[[ " $cmd" == *" -address $KUBE_CONTAINERD_SOCK "* ]] && echo "${d#/proc/}"
	done
}

# kube_pods_down: end every pod of the test bed's containerd. A SIGKILL to a
# container's init (a child of its shim) ends its pid namespace; containerd
# then deletes the task and the shim exits. Shims still there after 10 s
# are killed.
kube_pods_down() {
	local shims=() p c i
	mapfile -t shims < <(kube_shims)
	if [[ ${#shims[@]} -eq 0 ]]; then
		return 0
	fi
	for p in "${shims[@]}"; do
		for c in $(pgrep -P "$p"); do
			kill -KILL "$c" 2>/dev/null || true
		done
	done
	if pid_of kube-containerd "${KUBE_EXE[kube-containerd]}" >/dev/null; then
		for ((i = 0; i < 100; i++)); do
			[[ -z $(kube_shims) ]] && break
			sleep 0.1
		done
	fi
	for p in $(kube_shims); do
		kill -KILL "$p" 2>/dev/null || true
	done
	report kube-pods stopped "${#shims[@]} pod shims of $KUBE_CONTAINERD_SOCK"
}

# kube_mounts_down: unmount what the test bed's containerd and kubelet
# mounted under $KUBE (rootfs overlays, shm, network namespaces, volumes),
# deepest first.
kube_mounts_down() {
	local m n=0
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		n=$((n + 1))
	done < <(awk -v p="$KUBE/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	rm -rf "$KUBE_CONTAINERD/state/io.containerd.grpc.v1.cri/netns" 2>/dev/null || true
	[[ $n -gt 0 ]] && report kube-mounts removed "$n under $KUBE"
	return 0
}

# kube_net_down: the pods' bridge, address leases and the CNI result cache
# entries of this containerd's pod sandboxes (by network name, or for lo by
# sandbox id).
kube_net_down() {
	if ip link show "$KUBE_CNI_BRIDGE" >/dev/null 2>&1; then
		ip link delete "$KUBE_CNI_BRIDGE" || true
	fi
	rm -rf "$KUBE_CNI_IPAM"
	rm -f /var/lib/cni/results/"$KUBE_CNI_NET"-*
	local d
	for d in "$KUBE_CONTAINERD"/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
		[[ -d $d ]] && rm -f "/var/lib/cni/results/cni-loopback-${d##*/}-lo"
	done
	# The kubelet's pod cgroups (kubepods in each v1 hierarchy), now empty.
	local h
	for h in /sys/fs/cgroup/*/kubepods; do
		[[ -d $h ]] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	return 0
}

kube_down() {
	local n
	for n in kube-localpv kubelet agent-sandbox-controller kube-coredns kube-router kube-proxy kube-scheduler kube-controller-manager kube-apiserver; do
		stop_daemon "$n" "${KUBE_EXE[$n]}"
	done
	kube_pods_down
	kube_net_rules_down
	stop_daemon kube-containerd "${KUBE_EXE[kube-containerd]}"
	kube_mounts_down
	kube_net_down
	stop_daemon kube-etcd "${KUBE_EXE[kube-etcd]}"
}
