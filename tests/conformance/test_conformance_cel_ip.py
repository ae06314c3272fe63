"""Kubernetes' CEL IP library cases, as data: kubernetes/kubernetes@95f08499d652
staging/src/k8s.io/apiserver/pkg/cel/library/ip_test.go TestIP, run in kubetrain's CEL environment."""

from __future__ import annotations

import pytest
from conformance_rows import COMPILE_ERROR, K8S, RUNTIME_ERROR, at, CelRow, check_cel, equals

SOURCE = at("95f08499d652a6211121d8af35f470609217c730", "staging/src/k8s.io/apiserver/pkg/cel/library/ip_test.go")
Case = CelRow.citing(SOURCE)

ROWS = [Case("TestIP", name, expression, expect) for name, expression, expect in (
    ("parse ipv4", 'ip("192.168.0.1")', equals('ip("192.168.0.1")')),
    ("parse invalid ipv4", 'ip("192.168.0.1.0")', RUNTIME_ERROR),
    ("isIP valid ipv4", 'isIP("192.168.0.1")', True),
    ("isIP invalid ipv4", 'isIP("192.168.0.1.0")', False),
    ("ip.isCanonical valid ipv4", 'ip.isCanonical("127.0.0.1")', True),
    ("ip.isCanonical invalid ipv4", 'ip.isCanonical("127.0.0.1.0")', RUNTIME_ERROR),
    ("ipv4 family", 'ip("192.168.0.1").family()', 4),
    ("ipv4 isUnspecified true", 'ip("0.0.0.0").isUnspecified()', True),
    ("ipv4 isUnspecified false", 'ip("127.0.0.1").isUnspecified()', False),
    ("ipv4 isLoopback true", 'ip("127.0.0.1").isLoopback()', True),
    ("ipv4 isLoopback false", 'ip("1.2.3.4").isLoopback()', False),
    ("ipv4 isLinkLocalMulticast true", 'ip("224.0.0.1").isLinkLocalMulticast()', True),
    ("ipv4 isLinkLocalMulticast false", 'ip("224.0.1.1").isLinkLocalMulticast()', False),
    ("ipv4 isLinkLocalUnicast true", 'ip("169.254.169.254").isLinkLocalUnicast()', True),
    ("ipv4 isLinkLocalUnicast false", 'ip("192.168.0.1").isLinkLocalUnicast()', False),
    ("ipv4 isGlobalUnicast true", 'ip("192.168.0.1").isGlobalUnicast()', True),
    ("ipv4 isGlobalUnicast false", 'ip("255.255.255.255").isGlobalUnicast()', False),
    ("parse ipv6", 'ip("2001:db8::68")', equals('ip("2001:db8::68")')),
    ("parse invalid ipv6", 'ip("2001:db8:::68")', RUNTIME_ERROR),
    ("isIP valid ipv6", 'isIP("2001:db8::68")', True),
    ("isIP invalid ipv4 (ipv6)", 'isIP("2001:db8:::68")', False),
    ("ip.isCanonical valid ipv6", 'ip.isCanonical("2001:db8::68")', True),
    ("ip.isCanonical non-canonical ipv6", 'ip.isCanonical("2001:DB8::68")', False),
    ("ip.isCanonical invalid ipv6", 'ip.isCanonical("2001:db8:::68")', RUNTIME_ERROR),
    ("ipv6 family", 'ip("2001:db8::68").family()', 6),
    ("ipv6 isUnspecified true", 'ip("::").isUnspecified()', True),
    ("ipv6 isUnspecified false", 'ip("::1").isUnspecified()', False),
    ("ipv6 isLoopback true", 'ip("::1").isLoopback()', True),
    ("ipv6 isLoopback false", 'ip("2001:db8::abcd").isLoopback()', False),
    ("ipv6 isLinkLocalMulticast true", 'ip("ff02::1").isLinkLocalMulticast()', True),
    ("ipv6 isLinkLocalMulticast false", 'ip("fd00::1").isLinkLocalMulticast()', False),
    ("ipv6 isLinkLocalUnicast true", 'ip("fe80::1").isLinkLocalUnicast()', True),
    ("ipv6 isLinkLocalUnicast false", 'ip("fd80::1").isLinkLocalUnicast()', False),
    ("ipv6 isGlobalUnicast true", 'ip("2001:db8::abcd").isGlobalUnicast()', True),
    ("ipv6 isGlobalUnicast false", 'ip("ff00::1").isGlobalUnicast()', False),
    ("passing cidr into isIP returns compile error", 'isIP(cidr("192.168.0.0/24"))', COMPILE_ERROR),
    ("converting an IP address to a string", 'string(ip("192.168.0.1"))', "192.168.0.1"),
    ("type of IP is net.IP", 'type(ip("192.168.0.1")) == net.IP', True),
)]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_cel_ip_case(row: CelRow):
    check_cel(row)
