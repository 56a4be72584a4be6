"""The cluster's DNS names and the server that answers them on the pods' network.

Names, as CoreDNS serves them in a cluster (`cluster.local`): a Service `<svc>.<ns>.svc` resolves
to the addresses of the pods its selector picks (headless or not: the test bed has no kube-proxy,
so a Service's name is its pods' addresses), and a pod with `hostname` and `subdomain` to
`<hostname>.<subdomain>.<ns>.svc`. Pods search `<ns>.svc.cluster.local`, `svc.cluster.local` and
`cluster.local`, so `MASTER_ADDR=<job>-master-0` and TF_CONFIG's `<pod>.<ns>.svc` both resolve.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any, Dict, Iterable, List, Mapping, Tuple

from dnslib import QTYPE, RCODE, RR, A, DNSRecord

DOMAIN = "cluster.local"
_IP_FREEBIND = 15  # Linux: bind an address before its interface has it (the bridge comes later)


def search_domains(namespace: str) -> List[str]:
    """The DNS search path of a pod in `namespace`."""
    return [f"{namespace}.svc.{DOMAIN}", f"svc.{DOMAIN}", DOMAIN]


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def name_table(pods: Iterable[Mapping[str, Any]], services: Iterable[Mapping[str, Any]],
               addresses: Mapping[str, str], host_services: Iterable[Tuple[str, str]] = (),
               host_address: str = "") -> Dict[str, List[str]]:
    """{fully qualified name (lower case, no trailing dot): [addresses]}.

    Args:
      pods: The pods of the node (objects as the API returns them).
      services: Every Service.
      addresses: Each pod's address by uid (only pods with an address are named).
      host_services: (namespace, name) of Services whose process runs on the host.
      host_address: The host's address as the pods reach it (their gateway).
    """
    table: Dict[str, List[str]] = {
        f"{name}.{namespace}.svc.{DOMAIN}".lower(): [host_address]
        for namespace, name in host_services if host_address}
    placed = [p for p in pods if p["metadata"]["uid"] in addresses
              and not p["metadata"].get("deletionTimestamp")]
    for pod in placed:
        meta, spec = pod["metadata"], pod["spec"]
        if spec.get("subdomain"):
            hostname = spec.get("hostname") or meta["name"]
            name = f"{hostname}.{spec['subdomain']}.{meta['namespace']}.svc.{DOMAIN}"
            table.setdefault(name.lower(), []).append(addresses[meta["uid"]])
    for service in services:
        meta, selector = service["metadata"], (service.get("spec") or {}).get("selector") or {}
        ips = sorted({addresses[p["metadata"]["uid"]] for p in placed
                      if p["metadata"]["namespace"] == meta["namespace"]
                      and _selects(selector, p["metadata"].get("labels") or {})})
        if ips:
            table[f"{meta['name']}.{meta['namespace']}.svc.{DOMAIN}".lower()] = ips
    return table


class NameServer:
    """Answers A queries from a name table over UDP at one address (port 53): the pods' gateway,
    the one address the bed serves beyond loopback (on the bridge of its own pods' network)."""

    def __init__(self, address: str, clients: str, port: int = 53):
        """Binds `address`:`port` (UDP) and answers queries from the network `clients` only.

        Args:
          address: The pods' gateway address (on the bridge the pods' network makes).
          clients: The pods' subnet (CIDR); other senders get no answer.
          port: The DNS port.
        """
        self.address = address
        self._clients = ipaddress.ip_network(clients)
        self.table: Dict[str, List[str]] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_IP, _IP_FREEBIND, 1)
        self._sock.bind((address, port))
        self._sock.settimeout(0.5)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns", daemon=True)
        self._thread.start()

    def answer(self, query: DNSRecord) -> DNSRecord:
        """The reply to one query: A records, NOERROR without records, or NXDOMAIN."""
        reply = query.reply()
        name = str(query.q.qname).rstrip(".").lower()
        ips = self.table.get(name)
        if ips is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif query.q.qtype in (QTYPE.A, QTYPE.ANY):
            for ip in ips:
                reply.add_answer(RR(query.q.qname, QTYPE.A, rdata=A(ip), ttl=1))
        return reply

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            if ipaddress.ip_address(peer[0]) not in self._clients:
                continue
            try:
                reply = self.answer(DNSRecord.parse(data))
                self._sock.sendto(reply.pack(), peer)
            except Exception:  # a malformed packet is dropped, as a server would
                continue

    def close(self) -> None:
        self._stopping.set()
        self._sock.close()
        self._thread.join(timeout=2)
