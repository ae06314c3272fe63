"""Kubernetes' CEL quantity library cases, as data: kubernetes/kubernetes@16913111deb1
staging/src/k8s.io/apiserver/pkg/cel/library/quantity_test.go TestQuantity, run in kubetrain's CEL environment.

Cases of functions Kubernetes 1.33's library lacks (mul, div, divInt, added in a later release) are left out: a
rule calling them fails to compile on a 1.33 API server and at kubetrain alike.
"""

from __future__ import annotations

import pytest
from conformance_rows import COMPILE_ERROR, K8S, RUNTIME_ERROR, at, CelRow, check_cel, equals

SOURCE = at("16913111deb1a4c4ff76f4ba7ffd9ebef397a303", "staging/src/k8s.io/apiserver/pkg/cel/library/quantity_test.go")
Case = CelRow.citing(SOURCE)

ROWS = [Case("TestQuantity", name, expression, expect) for name, expression, expect in (
    ("parse", 'quantity("12Mi")', equals('quantity("12Mi")')),
    ("parseInvalidSuffix", 'quantity("10Mo")', RUNTIME_ERROR),
    ("parseInvalidSuffixPassesRegex", 'quantity("10Mm")', RUNTIME_ERROR),
    ("isQuantity", 'isQuantity("20")', True),
    ("isQuantity_megabytes", 'isQuantity("20M")', True),
    ("isQuantity_mebibytes", 'isQuantity("20Mi")', True),
    ("isQuantity_invalidSuffix", 'isQuantity("20Mo")', False),
    ("isQuantity_passingRegex", 'isQuantity("10Mm")', False),
    ("isQuantity_noOverload", "isQuantity([1, 2, 3])", COMPILE_ERROR),
    ("equality_reflexivity", 'quantity("200M") == quantity("200M")', True),
    ("equality_symmetry", 'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    ("equality_transitivity", 'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
     'quantity("0.002G") == quantity("2000k")', True),
    ("inequality", 'quantity("200M") == quantity("0.3G")', False),
    ("quantity_less", 'quantity("50M").isLessThan(quantity("50Mi"))', True),
    ("quantity_less_obvious", 'quantity("50M").isLessThan(quantity("100M"))', True),
    ("quantity_less_false", 'quantity("100M").isLessThan(quantity("50M"))', False),
    ("quantity_greater", 'quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ("quantity_greater_obvious", 'quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ("quantity_greater_false", 'quantity("50M").isGreaterThan(quantity("100M"))', False),
    ("compare_equal", 'quantity("200M").compareTo(quantity("0.2G"))', 0),
    ("compare_less", 'quantity("50M").compareTo(quantity("50Mi"))', -1),
    ("compare_greater", 'quantity("50Mi").compareTo(quantity("50M"))', 1),
    ("add_quantity", 'quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ("add_int", 'quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ("sub_quantity", 'quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ("sub_int", 'quantity("50k").sub(20) == quantity("49980")', True),
    ("arith_chain_1", 'quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ("arith_chain", 'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20),
    ("as_integer", 'quantity("50k").asInteger()', 50000),
    ("as_integer_error", 'quantity("9999999999999999999999999999999999999G").asInteger()', RUNTIME_ERROR),
    ("is_integer (too large)", 'quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ("is_integer", 'quantity("50").isInteger()', True),
    ("as_float", 'quantity("50.703k").asApproximateFloat()', 50703.0),
)]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_cel_quantity_case(row: CelRow):
    check_cel(row)
