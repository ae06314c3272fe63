"""The CEL environment the Kubernetes API server gives CRD validation rules, on cel-expr-python.

Kubernetes 1.33 compiles `x-kubernetes-validations` rules with cel-go's standard definitions, the
strings extension at version 2, optional types and its own libraries (k8s.io/apiserver/pkg/cel/library,
enabled in k8s.io/apiserver/pkg/cel/environment/base.go): lists, regex, urls, quantity, ip, cidr, and
cel-go's sets. `environment()` builds the same on cel-expr-python (the CEL C++ runtime): strings and
optional types are the runtime's own extensions; Kubernetes' libraries are written here from their
documented semantics. Their opaque types (`kubernetes.Quantity`, `kubernetes.URL`, `net.IP`, `net.CIDR`)
are one-field protobuf messages holding a canonical form, so `==` compares values as Kubernetes does
(`quantity('1') == quantity('1000m')`, `ip('::1') == ip('0:0::1')`).

Not provided, so a rule calling them fails to compile (and the failure names the function): the
`format` library (`format.dns1123Label().validate(s)`, 1.31; it returns optionals, which a Python
function cannot hand the runtime), `string(<CIDR>)`, two-variable comprehensions (1.32), semver and
image (1.33).
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import string
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from itertools import pairwise
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kubetrain.model.quantity import EXACT, exact_quantity

T = cel.Type
_INT64 = 2**63


# -- opaque types ------------------------------------------------------------------------------------------

def _message_types() -> tuple[descriptor_pool.DescriptorPool, dict[str, type]]:
    """A descriptor pool with one message per opaque type, each `{string value = 1}`."""
    pool = descriptor_pool.DescriptorPool()
    for package, names in (("kubernetes", ("Quantity", "URL")), ("net", ("IP", "CIDR"))):
        file = descriptor_pb2.FileDescriptorProto(name=f"kubetrain_cel_{package}.proto", package=package,
                                                  syntax="proto3")
        for name in names:
            file.message_type.add(name=name).field.add(
                name="value", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        pool.Add(file)
    classes = {full: message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
               for full in ("kubernetes.Quantity", "kubernetes.URL", "net.IP", "net.CIDR")}
    return pool, classes


_POOL, _CLASSES = _message_types()
QUANTITY, URL, IP, CIDR = (T(name) for name in ("kubernetes.Quantity", "kubernetes.URL", "net.IP", "net.CIDR"))
_Quantity, _Url, _Ip, _Cidr = (_CLASSES[name] for name in ("kubernetes.Quantity", "kubernetes.URL", "net.IP",
                                                           "net.CIDR"))


# -- values ------------------------------------------------------------------------------------------------

def cel_equal(a: Any, b: Any) -> bool:
    """CEL's equality on plain values: a bool never equals a number (Python's True == 1 does), numbers
    compare across int and double, lists and maps element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(cel_equal, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(cel_equal(v, b[k]) for k, v in a.items())
    return a == b


# -- lists (kubernetes.lists) ------------------------------------------------------------------------------

def _is_sorted(items: list) -> bool:
    return all(not (later < earlier) for earlier, later in pairwise(items))


def _returnable(name: str, items: list) -> None:
    """A list function here hands the runtime back an int, a double, a string or a bool: durations and timestamps
    cannot cross back (the runtime refuses them), so their sum, min and max are an evaluation error, never a
    crash; lists and maps have no order (Kubernetes refuses their min and max when the rule is compiled)."""
    for item in items:
        if isinstance(item, (datetime.timedelta, datetime.datetime)):
            raise ValueError(f"{name} of durations or timestamps is not supported by kubetrain's CEL runtime")
        if isinstance(item, (list, dict)):
            raise ValueError(f"no matching overload for '{name}': lists and maps have no order")


def _sum(items: list) -> int | float:
    _returnable("sum", items)
    total = sum(items, 0.0 if any(isinstance(x, float) for x in items) else 0)
    if isinstance(total, int) and not -_INT64 <= total < _INT64:
        raise OverflowError("integer overflow")
    return total


def _extreme(name: str, pick: Callable) -> Callable[[list], Any]:
    def impl(items: list) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        _returnable(name, items)
        return pick(items)
    return impl


def _index_of(items: list, item: Any) -> int:
    return next((i for i, x in enumerate(items) if cel_equal(x, item)), -1)


def _last_index_of(items: list, item: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if cel_equal(items[i], item)), -1)


# -- sets (cel-go ext.Sets) --------------------------------------------------------------------------------

def _contains(items: list, wanted: list) -> bool:
    return all(any(cel_equal(x, w) for x in items) for w in wanted)


def _intersects(a: list, b: list) -> bool:
    return any(any(cel_equal(x, y) for y in b) for x in a)


# -- regex (kubernetes.regex) ------------------------------------------------------------------------------

_POSIX_CLASSES = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
                  "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
                  "punct": "!-/:-@[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
                  "xdigit": "0-9A-Fa-f"}
_POSIX_CLASS = re.compile(r"\[:([a-z]+):\]")


@cache
def _regex(pattern: str) -> re.Pattern:
    """An RE2 pattern (Go's and the CEL runtime's syntax) as Python reads it the same way: `$` and `\\z` end
    the text (Python's `$` also matches before a final newline), and POSIX classes (`[[:alpha:]]`) are
    spelt out. Compiled once: the runtime's own `matches` compiles its pattern on every call."""
    multiline = re.match(r"\(\?[a-zA-Z]*m", pattern) is not None
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append("\\Z" if pattern[i + 1:i + 2] == "z" else pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            posix = _POSIX_CLASS.match(pattern, i)
            if posix and posix.group(1) in _POSIX_CLASSES:
                out.append(_POSIX_CLASSES[posix.group(1)])
                i = posix.end()
                continue
            in_class = c != "]" or pattern[i - 1] == "[" or pattern[i - 2:i] == "[^"
        elif c == "[":
            in_class = True
        elif c == "$" and not multiline:
            c = "\\Z"
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _matches(text: str, pattern: str) -> bool:
    return _regex(pattern).search(text) is not None


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


# -- urls (kubernetes.urls): Go's url.ParseRequestURI, the OpenAPI 'uri' format ----------------------------

_HEX = set(string.hexdigits)
_SCHEME_CHARS = set(string.ascii_letters + string.digits + "+-.")
_USERINFO = set(string.ascii_letters + string.digits + "-._:~!$&'()*+,;=%@")
_HOST_SAFE = set(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:[]<>\"")
_PATH_SAFE = set(string.ascii_letters + string.digits + "-_.~$&+,/:;=@")
_PATH_ENCODED_OK = _PATH_SAFE | set("!'()*[]%")


def _unescape(text: str, host: bool = False, plus_is_space: bool = False) -> str:
    out, i = bytearray(), 0
    raw = text.encode()
    while i < len(raw):
        c = raw[i]
        if c == ord("%"):
            pair = raw[i + 1:i + 3].decode("latin-1")
            if len(pair) < 2 or not set(pair) <= _HEX:
                raise ValueError(f"invalid URL escape {raw[i:i + 3].decode('latin-1')!r}")
            if host and int(pair[0], 16) < 8 and pair != "25":
                raise ValueError(f"invalid URL escape {raw[i:i + 3].decode('latin-1')!r}")
            out.append(int(pair, 16))
            i += 3
            continue
        if host and c < 0x80 and chr(c) not in _HOST_SAFE:
            raise ValueError(f"invalid character {chr(c)!r} in host name")
        out.append(ord(" ") if plus_is_space and c == ord("+") else c)
        i += 1
    return out.decode("utf-8", "replace")


def _valid_port(colon_port: str) -> bool:
    return colon_port == "" or (colon_port[0] == ":" and colon_port[1:].isdigit() and colon_port[1:].isascii())


def _parse_host(host: str) -> str:
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        if not _valid_port(host[end + 1:]):
            raise ValueError(f"invalid port {host[end + 1:]!r} after host")
    elif (colon := host.rfind(":")) >= 0 and not _valid_port(host[colon:]):
        raise ValueError(f"invalid port {host[colon:]!r} after host")
    return _unescape(host, host=True)


def parse_url(text: str, request: bool = True) -> dict[str, str]:
    """scheme, host, path (raw) and query of a URL, read as Go's net/url reads it; `request` is
    ParseRequestURI (an absolute URI or an absolute path, no fragment split), else Parse. ValueError
    when it is not one."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError("invalid control character in URL")
    if not request:
        text = text.split("#", 1)[0]
    if text == "":
        raise ValueError("empty url")
    if text == "*":
        return {"scheme": "", "host": "", "path": "*", "query": ""}
    scheme, rest = "", text
    for i, c in enumerate(text):
        if c == ":":
            if i == 0:
                raise ValueError("missing protocol scheme")
            scheme, rest = text[:i].lower(), text[i + 1:]
            break
        if c not in _SCHEME_CHARS or (i == 0 and not c.isalpha()):
            break
    if rest.endswith("?") and rest.count("?") == 1:
        rest, query = rest[:-1], ""
    else:
        rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return {"scheme": scheme, "host": "", "path": "", "query": query}  # opaque: mailto:a@b
        raise ValueError("invalid URI for request")
    host = ""
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, hostport = authority.rpartition("@")
        host = _parse_host(hostport)
        if at and not set(userinfo) <= _USERINFO:
            raise ValueError("net/url: invalid userinfo")
        if at:
            _unescape(userinfo)
    _unescape(rest)
    return {"scheme": scheme, "host": host, "path": rest, "query": query}


def _escape_path(path: str) -> str:
    return "".join(chr(b) if chr(b) in _PATH_SAFE else f"%{b:02X}" for b in path.encode())


def _url(text: str) -> Any:
    try:
        parse_url(text)
    except ValueError as error:
        raise ValueError(f"URL parse error during conversion from string: {error}") from None
    return _Url(value=text)


def _is_url(text: str) -> bool:
    try:
        parse_url(text)
    except ValueError:
        return False
    return True


def _url_part(part: str) -> Callable[[Any], str]:
    return lambda url: parse_url(url.value, request=False)[part]


def _host_and_port(url: Any) -> tuple[str, str]:
    host = parse_url(url.value, request=False)["host"]
    colon = host.rfind(":")
    port = ""
    if colon >= 0 and _valid_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _escaped_path(url: Any) -> str:
    raw = parse_url(url.value, request=False)["path"]
    if raw == "*":
        return raw
    return raw if set(raw) <= _PATH_ENCODED_OK else _escape_path(_unescape(raw))


def _query(url: Any) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for pair in parse_url(url.value, request=False)["query"].split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _unescape(key, plus_is_space=True), _unescape(value, plus_is_space=True)
        except ValueError:
            continue
        found.setdefault(key, []).append(value)
    return found


# -- quantity (kubernetes.quantity) ------------------------------------------------------------------------

def _quantity_of(value: Decimal) -> Any:
    return _Quantity(value="0" if value == 0 else str(value.normalize(EXACT)))


def _quantity(text: str) -> Any:
    return _quantity_of(exact_quantity(text))


def _is_quantity(text: str) -> bool:
    try:
        exact_quantity(text)
    except ValueError:
        return False
    return True


def _amount(quantity: Any) -> Decimal:
    return Decimal(quantity.value)


def _as_integer(quantity: Any) -> int:
    value = _amount(quantity)
    if value != value.to_integral_value() or not -_INT64 <= value < _INT64:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _is_integer(quantity: Any) -> bool:
    value = _amount(quantity)
    return value == value.to_integral_value() and -_INT64 <= value < _INT64


def _compare(a: Any, b: Any) -> int:
    x, y = _amount(a), _amount(b)
    return (x > y) - (x < y)


def _sign(quantity: Any) -> int:
    value = _amount(quantity)
    return (value > 0) - (value < 0)


def _plus(sign: int) -> Callable[[Any, Any], Any]:
    def impl(quantity: Any, other: Any) -> Any:
        amount = Decimal(other) if isinstance(other, int) else _amount(other)
        return _quantity_of(EXACT.add(_amount(quantity), sign * amount))
    return impl


# -- ip and cidr (kubernetes.net.ip, kubernetes.net.cidr) --------------------------------------------------

def _address(text: str, what: str = "IP Address") -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in text:
        raise ValueError(f"{what} with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} parse error during conversion from string") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return address


def _network(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    address, slash, bits = text.partition("/")
    if not slash or not bits.isdigit() or not bits.isascii() or (bits != "0" and bits.startswith("0")):
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    parsed = _address(address, "CIDR")
    if int(bits) > parsed.max_prefixlen:
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    return ipaddress.ip_interface(f"{parsed}/{bits}")


def _ip(text: str) -> Any:
    return _Ip(value=str(_address(text)))


def _checks(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def impl(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True
    return impl


def _is_canonical(text: str) -> bool:
    return str(_address(text)) == text


def _ip_test(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda ip: test(ipaddress.ip_address(ip.value))


def _link_local_multicast(address: Any) -> bool:
    network = "224.0.0.0/24" if address.version == 4 else "ff02::/16"
    return address in ipaddress.ip_network(network)


def _global_unicast(address: Any) -> bool:
    """Go's netip.Addr.IsGlobalUnicast: private ranges count, unlike Python's is_global."""
    return not (address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local
                or (address.version == 4 and address == ipaddress.IPv4Address("255.255.255.255")))


def _cidr(text: str) -> Any:
    network = _network(text)
    return _Cidr(value=f"{network.ip}/{network.network.prefixlen}")


def _interface(cidr: Any) -> Any:
    return ipaddress.ip_interface(cidr.value)


def _contains_ip(cidr: Any, ip: Any) -> bool:
    address = _address(ip) if isinstance(ip, str) else ipaddress.ip_address(ip.value)
    return address in _interface(cidr).network


def _contains_cidr(cidr: Any, other: Any) -> bool:
    inner = _network(other) if isinstance(other, str) else _interface(other)
    outer = _interface(cidr).network
    return inner.network.prefixlen >= outer.prefixlen and inner.ip in outer


# -- the environment ---------------------------------------------------------------------------------------

def _overload(id: str, result: Any, params: list[Any], impl: Callable, member: bool = False) -> cel.Overload:
    return cel.Overload(id, result, params, is_member=member, impl=impl)


def _functions() -> list[cel.FunctionDecl]:
    L, D, S, I, B = T.List(T.DYN), T.DYN, T.STRING, T.INT, T.BOOL
    overloads: dict[str, list[cel.Overload]] = {
        # lists
        "isSorted": [_overload("list_is_sorted", B, [L], _is_sorted, True)],
        "sum": [_overload("list_sum", D, [L], _sum, True)],
        "min": [_overload("list_min", D, [L], _extreme("min", min), True)],
        "max": [_overload("list_max", D, [L], _extreme("max", max), True)],
        "indexOf": [_overload("list_index_of", I, [L, D], _index_of, True)],
        "lastIndexOf": [_overload("list_last_index_of", I, [L, D], _last_index_of, True)],
        # sets
        "sets.contains": [_overload("sets_contains", B, [L, L], _contains)],
        "sets.equivalent": [_overload("sets_equivalent", B, [L, L], lambda a, b: _contains(a, b) and _contains(b, a))],
        "sets.intersects": [_overload("sets_intersects", B, [L, L], _intersects)],
        # regex: `matches` is the standard one, compiled once (rules call it as written; see cel_rules)
        "matchesRegex": [_overload("string_matches_regex", B, [S, S], _matches, True),
                         _overload("matches_regex_string", B, [S, S], _matches)],
        "find": [_overload("string_find", S, [S, S], _find, True)],
        "findAll": [_overload("string_find_all", T.List(S), [S, S], _find_all, True),
                    _overload("string_find_all_n", T.List(S), [S, S, I], _find_all, True)],
        # urls
        "url": [_overload("string_to_url", URL, [S], _url)],
        "isURL": [_overload("is_url_string", B, [S], _is_url)],
        "getScheme": [_overload("url_get_scheme", S, [URL], _url_part("scheme"), True)],
        "getHost": [_overload("url_get_host", S, [URL], _url_part("host"), True)],
        "getHostname": [_overload("url_get_hostname", S, [URL], lambda u: _host_and_port(u)[0], True)],
        "getPort": [_overload("url_get_port", S, [URL], lambda u: _host_and_port(u)[1], True)],
        "getEscapedPath": [_overload("url_get_escaped_path", S, [URL], _escaped_path, True)],
        "getQuery": [_overload("url_get_query", T.Map(S, T.List(S)), [URL], _query, True)],
        # quantity
        "quantity": [_overload("string_to_quantity", QUANTITY, [S], _quantity)],
        "isQuantity": [_overload("is_quantity_string", B, [S], _is_quantity)],
        "sign": [_overload("quantity_sign", I, [QUANTITY], _sign, True)],
        "isGreaterThan": [_overload("quantity_is_greater_than", B, [QUANTITY, QUANTITY],
                                    lambda a, b: _compare(a, b) > 0, True)],
        "isLessThan": [_overload("quantity_is_less_than", B, [QUANTITY, QUANTITY],
                                 lambda a, b: _compare(a, b) < 0, True)],
        "compareTo": [_overload("quantity_compare_to", I, [QUANTITY, QUANTITY], _compare, True)],
        "asApproximateFloat": [_overload("quantity_get_float", T.DOUBLE, [QUANTITY], lambda q: float(_amount(q)),
                                         True)],
        "asInteger": [_overload("quantity_get_int", I, [QUANTITY], _as_integer, True)],
        "isInteger": [_overload("quantity_is_integer", B, [QUANTITY], _is_integer, True)],
        "add": [_overload("quantity_add", QUANTITY, [QUANTITY, QUANTITY], _plus(1), True),
                _overload("quantity_add_int", QUANTITY, [QUANTITY, I], _plus(1), True)],
        "sub": [_overload("quantity_sub", QUANTITY, [QUANTITY, QUANTITY], _plus(-1), True),
                _overload("quantity_sub_int", QUANTITY, [QUANTITY, I], _plus(-1), True)],
        # ip and cidr
        "ip": [_overload("string_to_ip", IP, [S], _ip),
               _overload("cidr_ip", IP, [CIDR], lambda c: _Ip(value=str(_interface(c).ip)), True)],
        "isIP": [_overload("is_ip", B, [S], _checks(_address))],
        "ip.isCanonical": [_overload("ip_is_canonical", B, [S], _is_canonical)],
        "family": [_overload("ip_family", I, [IP], lambda ip: ipaddress.ip_address(ip.value).version, True)],
        "isUnspecified": [_overload("ip_is_unspecified", B, [IP], _ip_test(lambda a: a.is_unspecified), True)],
        "isLoopback": [_overload("ip_is_loopback", B, [IP], _ip_test(lambda a: a.is_loopback), True)],
        "isLinkLocalMulticast": [_overload("ip_is_link_local_multicast", B, [IP], _ip_test(_link_local_multicast),
                                           True)],
        "isLinkLocalUnicast": [_overload("ip_is_link_local_unicast", B, [IP], _ip_test(lambda a: a.is_link_local),
                                         True)],
        "isGlobalUnicast": [_overload("ip_is_global_unicast", B, [IP], _ip_test(_global_unicast), True)],
        "cidr": [_overload("string_to_cidr", CIDR, [S], _cidr)],
        "isCIDR": [_overload("is_cidr", B, [S], _checks(_network))],
        "containsIP": [_overload("cidr_contains_ip_string", B, [CIDR, S], _contains_ip, True),
                       _overload("cidr_contains_ip_ip", B, [CIDR, IP], _contains_ip, True)],
        "containsCIDR": [_overload("cidr_contains_cidr_string", B, [CIDR, S], _contains_cidr, True),
                         _overload("cidr_contains_cidr", B, [CIDR, CIDR], _contains_cidr, True)],
        "masked": [_overload("cidr_masked", CIDR, [CIDR],
                             lambda c: _Cidr(value=str(_interface(c).network)), True)],
        "prefixLength": [_overload("cidr_prefix_length", I, [CIDR], lambda c: _interface(c).network.prefixlen,
                                   True)],
        # string(<CIDR>) cannot join it: the runtime dispatches on kinds, and both types are messages.
        "string": [_overload("ip_to_string", S, [IP], lambda ip: ip.value)],
    }
    return [cel.FunctionDecl(name, found) for name, found in overloads.items()]


@cache
def environment(bindings: bool = False) -> Any:
    """The environment rules compile in: `self` and `oldSelf` of any type (a rule's schema node gives
    the values their types at evaluation), and the libraries above. `bindings` adds `cel.bind`, which
    Kubernetes does not offer rules: kubetrain uses it to give a rule `oldSelf` as `optional.none()`."""
    extensions = [ext_strings.ExtStrings(version=2), ext_optional.ExtOptional(),
                  cel.CelExtension("kubernetes", _functions())]
    return cel.NewEnv(_POOL, variables={"self": T.DYN, "oldSelf": T.DYN},
                      extensions=[*extensions, ext_bindings.ExtBindings()] if bindings else extensions)
