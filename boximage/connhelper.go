package boximage

// BuildKit's connection helpers for BuildOptions.BuildkitAddr: a buildkitd
// in a container (docker-container://NAME[?context=CTX], through `docker
// exec NAME buildctl dial-stdio`) or in a Kubernetes pod
// (kube-pod://NAME?namespace=NS&context=CTX, through `kubectl exec`). The
// client resolves an address by its scheme among the helpers linked in.
import (
	_ "github.com/moby/buildkit/client/connhelper/dockercontainer"
	_ "github.com/moby/buildkit/client/connhelper/kubepod"
)
