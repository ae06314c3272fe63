"""Kubernetes' CEL CIDR library cases, as data: kubernetes/kubernetes@78fc8e44052f
staging/src/k8s.io/apiserver/pkg/cel/library/cidr_test.go TestCIDR, run in kubetrain's CEL environment.

One row differs, on purpose and documented (README, Choices, CEL runtime): `string(<CIDR>)` does not compile at
kubetrain (the runtime dispatches a function's overloads on the argument's kind, and an IP and a CIDR are both
messages, so `string` takes only the IP); a CRD rule calling it is reported as a compile error, never skipped.
"""

from __future__ import annotations

import pytest
from conformance_rows import COMPILE_ERROR, K8S, RUNTIME_ERROR, at, CelRow, check_cel, equals

SOURCE = at("78fc8e44052f699bf598f84b697b41e5a328c9c5", "staging/src/k8s.io/apiserver/pkg/cel/library/cidr_test.go")
Case = CelRow.citing(SOURCE)
STRING_OF_CIDR = "kubetrain refuses to compile string(<CIDR>) (README, Choices: CEL runtime); upstream returns the text"

ROWS = [Case("TestCIDR", name, expression, expect) for name, expression, expect in (
    ("compilation error for cidr(int)", "cidr(192168)", COMPILE_ERROR),
    ("parse ipv4", 'cidr(dyn("192.168.0.0/24"))', equals('cidr("192.168.0.0/24")')),
    ("parse invalid ipv4", 'cidr("192.168.0.0/")', RUNTIME_ERROR),
    ("contains IP ipv4 (IP)", 'cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))', True),
    ("does not contain IP ipv4 (IP)", 'cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))', False),
    ("contains IP ipv4 (string)", 'cidr("192.168.0.0/24").containsIP("192.168.0.1")', True),
    ("does not contain IP ipv4 (string)", 'cidr("192.168.0.0/24").containsIP("192.168.1.1")', False),
    ("contains CIDR ipv4 (CIDR)", 'cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))', True),
    ("does not contain IP ipv4 (CIDR)", 'cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))', False),
    ("contains CIDR ipv4 (string)", 'cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")', True),
    ("does not contain CIDR ipv4 (string)", 'cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', False),
    ("returns IP ipv4", 'cidr("192.168.0.0/24").ip()', equals('ip("192.168.0.0")')),
    ("masks masked ipv4", 'cidr("192.168.0.0/24").masked()', equals('cidr("192.168.0.0/24")')),
    ("masks unmasked ipv4", 'cidr("192.168.0.1/24").masked()', equals('cidr("192.168.0.0/24")')),
    ("returns prefix length ipv4", 'cidr("192.168.0.0/24").prefixLength()', 24),
    ("parse ipv6", 'cidr("2001:db8::/32")', equals('cidr("2001:db8::/32")')),
    ("parse invalid ipv6", 'cidr("2001:db8::/")', RUNTIME_ERROR),
    ("contains IP ipv6 (IP)", 'cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))', True),
    ("does not contain IP ipv6 (IP)", 'cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))', False),
    ("contains IP ipv6 (string)", 'cidr("2001:db8::/32").containsIP("2001:db8::1")', True),
    ("does not contain IP ipv6 (string)", 'cidr("2001:db8::/32").containsIP("2001:dc8::1")', False),
    ("contains CIDR ipv6 (CIDR)", 'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))', True),
    ("does not contain IP ipv6 (CIDR)", 'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))', False),
    ("contains CIDR ipv6 (string)", 'cidr("2001:db8::/32").containsCIDR("2001:db8::/33")', True),
    ("does not contain CIDR ipv6 (string)", 'cidr("2001:db8::/32").containsCIDR("2001:db8::/31")', False),
    ("returns IP ipv6", 'cidr("2001:db8::/32").ip()', equals('ip("2001:db8::")')),
    ("masks masked ipv6", 'cidr("2001:db8::/32").masked()', equals('cidr("2001:db8::/32")')),
    ("masks unmasked ipv6", 'cidr("2001:db8:1::/32").masked()', equals('cidr("2001:db8::/32")')),
    ("returns prefix length ipv6", 'cidr("2001:db8::/32").prefixLength()', 32),
    ("type of CIDR is net.CIDR", 'type(cidr("192.168.0.0/24")) == net.CIDR', True),
)] + [Case("TestCIDR", "converting a CIDR to a string", 'string(cidr("192.168.0.0/24"))', COMPILE_ERROR,
           note=STRING_OF_CIDR)]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_cel_cidr_case(row: CelRow):
    check_cel(row)
