// Package open opens a vendor by its name from the environment (and the
// few flags that override it): the one way every boxctl command, and the
// conformance suite's command, connect to Docker, E2B, Daytona or
// Kubernetes. It imports every vendor; no vendor imports it.
//
// The environment each vendor reads:
//
//	docker      DOCKER_HOST and the Docker client's usual variables, and
//	            BOXCTL_DOCKER_PORTS (published, the default, or direct: a
//	            box's ports at its address, docker.WithDirectPorts)
//	e2b         E2B_API_KEY (required; never printed), E2B_API_URL (default
//	            https://api.$E2B_DOMAIN), E2B_DOMAIN (default e2b.app),
//	            BOXCTL_E2B_DIAL (host:port every request for the domain
//	            connects to, as curl's --resolve does, for `boxctl emulate
//	            e2b`); a plain-HTTP control plane means plain-HTTP sandbox
//	            URLs too
//	daytona     DAYTONA_API_KEY (required; never printed), DAYTONA_API_URL
//	            (default https://app.daytona.io/api), DAYTONA_ORGANIZATION_ID
//	            (the organization, when the key is a JWT)
//	kubernetes  the cluster as kubectl finds it ($KUBECONFIG, ~/.kube/config,
//	            or the pod's service account), and BOXCTL_KUBE_CONTEXT,
//	            BOXCTL_KUBE_NAMESPACE, BOXCTL_KUBE_POOL (a SandboxTemplate
//	            with a warm pool to claim open boxes from), BOXCTL_KUBE_HOST_ADDRESS
//	            (this machine's address as the cluster's pods reach it),
//	            BOXCTL_KUBE_STORAGE_CLASS (suspendable boxes' volumes),
//	            BOXCTL_KUBE_EGRESS_RELAY (an IPv4 address of this machine the
//	            pods reach without masquerade, where the confined boxes'
//	            relay and resolver listen on ports 53, 80 and 443)
//
// The vendors are clients of outside APIs and take functional options;
// this package, our own component, takes one Options struct.
package open
