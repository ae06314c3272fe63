"""Kubernetes' own cases for the list, regex and URL libraries, as data: kubernetes/kubernetes@f9cfc9d93491
staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation_test.go TestValidationExpressions
(its "stdlib list functions", "stdlib regex functions" and "URL parsing" cases), run in kubetrain's CEL environment.

The upstream cases evaluate rules against a CRD object (`self.ints` is [1, 2, 2, 3]); each row writes the object's
value in place of `self` and keeps the rule otherwise as it is. A valid rule evaluates to true; an error case is a
rule Kubernetes refuses. Where kubetrain differs on purpose, the row says how and why (README, Choices, CEL runtime):
its list functions take lists of any type, so a rule Kubernetes refuses when the CRD is created (min of lists, sum
of strings) is refused at kubetrain when it is evaluated; and durations and timestamps cannot be returned from
kubetrain's library functions, so their sum, min and max are an evaluation error instead of a value.
"""

from __future__ import annotations

import pytest
from conformance_rows import COMPILE_ERROR, K8S, REFUSED, RUNTIME_ERROR, at, CelRow, check_cel

SOURCE = at("f9cfc9d93491c42c0ee6b3705d4c46f7e173f356", "staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation_test.go")
Case = CelRow.citing(SOURCE)
TEST = "TestValidationExpressions"
TYPED_AT_EVALUATION = ("kubetrain's list functions take lists of any type (rules see `self` untyped), so the rule "
                       "compiles and every evaluation is refused; Kubernetes refuses the rule when the CRD is created")
NO_DURATION_RESULT = ("kubetrain's runtime cannot take a duration or timestamp back from a library function: the "
                      "rule's evaluation is an error (reported, never skipped) where Kubernetes computes the value")
SELF = {
    "self.ints": "[1, 2, 2, 3]", "self.unsortedInts": "[2, 1]", "self.emptyInts": "[]",
    "self.doubles": "[1.0, 2.0, 2.0, 3.0]", "self.unsortedDoubles": "[2.0, 1.0]", "self.emptyDoubles": "dyn([])",
    "self.strings": "['a', 'b', 'b', 'c']", "self.unsortedStrings": "['b', 'a']", "self.emptyStrings": "dyn([])",
    "self.durations": "[duration('1s'), duration('1m'), duration('1m'), duration('1h')]",
    "self.unsortedDurations": "[duration('1m'), duration('1s')]",
    "self.str": "'this is a 123 string 456'",
    "self.url": "'https://user:pass@kubernetes.io:80/docs/home?k1=a&k2=b&k2=c#anchor'",
}


def inline(rule: str) -> str:
    for name in sorted(SELF, key=len, reverse=True):
        rule = rule.replace(name, SELF[name])
    return rule


def case(group: str, rule: str, expect=True, **differs) -> CelRow:
    return Case(TEST, f"{group}: {rule}", inline(rule), expect, **differs)


LISTS, REGEX, URLS = "stdlib list functions", "stdlib regex functions", "URL parsing"
ROWS = [
    *[case(LISTS, rule) for rule in (
        "self.ints.sum() == 8", "self.ints.min() == 1", "self.ints.max() == 3", "self.emptyInts.sum() == 0",
        "self.ints.isSorted()", "self.emptyInts.isSorted()", "self.unsortedInts.isSorted() == false",
        "self.ints.indexOf(2) == 1", "self.ints.lastIndexOf(2) == 2", "self.ints.indexOf(10) == -1",
        "self.ints.lastIndexOf(10) == -1",
        "self.doubles.sum() == 8.0", "self.doubles.min() == 1.0", "self.doubles.max() == 3.0",
        "self.emptyDoubles.sum() == 0.0", "self.doubles.isSorted()", "self.unsortedDoubles.isSorted() == false",
        "self.doubles.indexOf(2.0) == 1", "self.doubles.lastIndexOf(2.0) == 2", "self.doubles.indexOf(10.0) == -1",
        "self.durations.isSorted()", "self.unsortedDurations.isSorted() == false",
        "self.durations.indexOf(duration('1m')) == 1", "self.durations.lastIndexOf(duration('1m')) == 2",
        "self.durations.indexOf(duration('2m')) == -1",
        "self.strings.min() == 'a'", "self.strings.max() == 'c'", "self.strings.isSorted()",
        "self.emptyStrings.isSorted()", "self.unsortedStrings.isSorted() == false", "self.strings.indexOf('b') == 1",
        "self.strings.lastIndexOf('b') == 2", "self.strings.indexOf('x') == -1", "self.strings.lastIndexOf('x') == -1",
        "[[1], [2]].indexOf([1]) == 0", "[{'a': 1}, {'b': 2}].lastIndexOf({'b': 2}) == 1",
        "([0] + self.emptyInts).min() == 0", "dyn([]).sum() == 0", "dyn([1, 2]).sum() == 3",
        "dyn([1.0, 2.0]).sum() == 3.0", "[].sum() == 0")],
    *[case(LISTS, rule, True, kubetrain=RUNTIME_ERROR, note=NO_DURATION_RESULT) for rule in (
        "self.durations.sum() == duration('1h2m1s')", "self.durations.min() == duration('1s')",
        "self.durations.max() == duration('1h')")],
    *[case(LISTS, rule, RUNTIME_ERROR) for rule in (
        "self.emptyInts.min() == 1", "self.emptyInts.max() == 3", "self.emptyDoubles.min() == 1.0",
        "self.emptyDoubles.max() == 3.0", "self.emptyStrings.min() == 'a'", "self.emptyStrings.max() == 'c'")],
    *[case(LISTS, rule, COMPILE_ERROR, kubetrain=REFUSED, note=TYPED_AT_EVALUATION) for rule in (
        "['a', 'b'].sum() == 'c'", "[[1], [2]].min() == [1]", "[{'a': 1}, {'b': 2}].max() == {'b': 2}")],
    *[case(REGEX, rule) for rule in (
        "self.str.find('[0-9]+') == '123'", "self.str.find('[0-9]+') != '456'", "self.str.find('xyz') == ''",
        "self.str.findAll('[0-9]+') == ['123', '456']", "self.str.findAll('[0-9]+', 0) == []",
        "self.str.findAll('[0-9]+', 1) == ['123']", "self.str.findAll('[0-9]+', 2) == ['123', '456']",
        "self.str.findAll('[0-9]+', 3) == ['123', '456']", "self.str.findAll('[0-9]+', -1) == ['123', '456']",
        "self.str.findAll('xyz') == []", "self.str.findAll('xyz', 1) == []")],
    *[case(REGEX, rule, COMPILE_ERROR, kubetrain=REFUSED,
           note="a constant pattern that is no regular expression: Kubernetes refuses the rule when the program is "
                "built, kubetrain when it is evaluated") for rule in (
        "self.str.find(')') == ''", "self.str.findAll(')') == []", "self.str.findAll(')', 1) == []")],
    case(REGEX, "self.str.matches('x++')", RUNTIME_ERROR),
    *[case(URLS, rule) for rule in (
        "url('/path').getScheme() == ''", "url('https://example.com/').getScheme() == 'https'",
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        "url('https://example.com/').getHost() == 'example.com'", "url('https://[::1]:80/').getHost() == '[::1]:80'",
        "url('https://[::1]/').getHost() == '[::1]'", "url('/path').getHost() == ''",
        "url('https://example.com:80/').getHostname() == 'example.com'",
        "url('https://127.0.0.1/').getHostname() == '127.0.0.1'", "url('https://[::1]/').getHostname() == '::1'",
        "url('/path').getHostname() == ''", "url('https://example.com:80/').getPort() == '80'",
        "url('https://example.com/').getPort() == ''", "url('/path').getPort() == ''",
        "url('https://example.com/path').getEscapedPath() == '/path'",
        "url('https://example.com/with space/').getEscapedPath() == '/with%20space/'",
        "url('https://example.com').getEscapedPath() == ''",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == { 'k1': ['a'], 'k2': ['b', 'c']}",
        "url('https://example.com/path?key with spaces=value with spaces').getQuery() == "
        "{ 'key with spaces': ['value with spaces']}",
        "url('https://example.com/path?').getQuery() == {}", "url('https://example.com/path').getQuery() == {}",
        "url(self.url).getScheme() == 'https'", "url(self.url).getHost() == 'kubernetes.io:80'",
        "url(self.url).getHostname() == 'kubernetes.io'", "url(self.url).getPort() == '80'",
        "url(self.url).getEscapedPath() == '/docs/home'",
        "url(self.url).getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        "isURL('https://user:pass@example.com:80/path?query=val#fragment')", "isURL('/path') == true",
        "isURL('https://a:b:c/') == false", "isURL('../relative-path') == false")],
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_cel_expression_case(row: CelRow):
    check_cel(row)
