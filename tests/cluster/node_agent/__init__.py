"""The node agent: the test bed's only stand-in, playing the kubelet (and the scheduler's binding).

It registers one Ready Node, binds every pending pod to it, runs each pod's containers as podman
containers of their images (command, args, env with the downward API, volumes, securityContext,
memory limits), resolves every Service and pod hostname on the pods' own network, posts pod status
as a kubelet does, finishes graceful deletion, and serves container logs on the kubelet port.
"""
