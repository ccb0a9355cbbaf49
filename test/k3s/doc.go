// Package k3s is the scenario on real k3s (TestK3s): three k3s servers with
// embedded etcd, each with its agent, and a k3s agent as the standby, every
// host in its own network, mount and UTS namespaces with its own containerd
// (lab/fleets/k3sfleet), built from the k3s source kept beside the checkout
// (hack/tools.sh k3s). fleet-role is installed as a k3s user installs it:
// each host's labels from the drop-in `fleet-role render k3s-config`
// prints, in the host's k3s configuration; the rendered manifest dropped
// into the first server's manifests directory, which k3s applies; the image
// built from this checkout imported into each host's containerd. So the
// probes and the controller run as pods, and read what k3s itself puts on
// its Nodes and serves on 127.0.0.1:2381.
//
// It holds what fleet-role assumes of k3s (docs/k3s.md lists each fact and
// where this scenario sees it): k3s's labels, annotations and EtcdIsVoter
// condition as fleet-role reads them, etcd's timing and metrics as k3s
// starts it, the cooldown dated from k3s's transition, RBAC and the
// admission policy with the tokens k3s's kubelets issue; and what the mesh
// scenario holds on a plain etcd: every host fit over a full window; a
// voter slowed on its network path reported unfit with its swap named
// within the bound; a paused voter (every process of its host frozen)
// making the controller say it would not act; the etcd members and the
// Nodes unchanged; then the standby marked ineligible through its k3s
// configuration as the README says; the Service fleet-role reaching the
// leader's status page; docs/install.md's Uninstall run as written, with
// k3s restarted where its deploy controller runs, which applies its
// manifests directory again at start, and nothing of fleet-role coming
// back; and everything it made removed, also on failure.
//
// It needs root and the host lock (it takes it; by hand, run it as
// flock /tmp/fleet-role-host.lock go test -count=1 -v -timeout 30m ./test/k3s).
// hack/test.sh builds k3s and runs it alone, without the race detector.
package k3s
