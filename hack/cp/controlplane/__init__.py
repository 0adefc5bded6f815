"""A real Kubernetes control plane for tests and local use, built from the Go module proxy.

    build   compile etcd, kube-apiserver, kube-controller-manager, kubectl and helm (with --node
            also kubelet, kube-scheduler and containerd), at the versions pinned in
            hack/cp/controlplane/versions.py, into the cache (never rebuilt once there)
    up      build if needed, then start etcd, kube-apiserver and kube-controller-manager on free
            loopback ports with a fresh CA; write an admin kubeconfig; wait until they are ready;
            with --node also a node (containerd, kube-scheduler, kubelet: pods run; needs root)
    down    stop what `up` started (by process id), undo what the node changed on the host, and
            remove its state directory
    env     print shell exports: KUBECONFIG, PATH and the binaries' paths
    add-node / remove-node
            add the node to a control plane that is up / take it away (the control plane stays)
    add-apiserver [--state-dir D] [--timeout S] NAME -- FLAGS... / remove-apiserver NAME
            start another kube-apiserver on the control plane's etcd, with FLAGS of its own (e.g.
            --max-requests-inflight=1), and print its URL as JSON / stop it
    load-image REF
            import a podman image into the node's containerd (pods: imagePullPolicy: Never)
    host-snapshot
            print what `down` leaves as `up --node` found it (links, iptables, cgroups, mounts,
            kernel settings, kubelet's fixed paths, node processes)

The cache is $FERRYMAN_CACHE_DIR, else $XDG_CACHE_HOME/ferryman, else ~/.cache/ferryman. The state
of a running control plane is --state-dir, else $FERRYMAN_CONTROLPLANE_DIR, else .state/controlplane
in the repository. See docs/development.md.
"""
