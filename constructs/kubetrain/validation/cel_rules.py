"""A CRD's validation rules (`x-kubernetes-validations`), evaluated on an object as the API server does on create.

`RulePlan.build(schema)` compiles every rule of a schema once and keeps only the schema nodes that carry
rules or lead to them (None when there are none, so kinds without rules cost nothing). `failures(obj)`
then walks the object along those nodes, as k8s.io/apiextensions-apiserver's schema/cel/validation.go
does:

- the object is defaulted first (structural defaulting happens before validation): a node absent from
  the object but with a `default` is evaluated with its default, and `self` sees its defaulted fields;
- `self` is the value at the rule's node, typed by the schema: `number` is a double, `integer` an int,
  `date`/`date-time` a timestamp, `duration` a duration, `byte` bytes, int-or-string either; a property
  is reached by its escaped name (`__dash__`, `__dot__`, `__slash__`, `__namespace__`, ...); a
  resource root (and an embedded resource) shows only apiVersion, kind and metadata.name/generateName;
  an object with x-kubernetes-preserve-unknown-fields and no properties shows no fields;
- rules on a node whose value is absent or null are not evaluated; each list item and map value is
  its own `self` for rules on `items` / `additionalProperties`;
- transition rules (those that reference `oldSelf`) are not evaluated on create, unless they set
  `optionalOldSelf: true`: then `oldSelf` is `optional.none()`;
- a rule that is false reports its `messageExpression` (when it evaluates to a one-line non-empty
  string), else its `message`, else "failed rule: <rule>", at the node's path or its `fieldPath`,
  worded by its `reason`; a rule that fails to evaluate (no such key, no matching overload) reports
  the evaluation error, as the API server does when it refuses the object.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cel_expr_python import cel
from google.protobuf import duration_pb2, timestamp_pb2

from kubetrain.rules.registry import register
from kubetrain.rules.sources import CRDS, cite
from kubetrain.validation.cel_library import environment

RULE_FAILED = register(
    "KT604", "error", "an object fails a CEL validation rule of its CRD",
    rationale="CRDs carry x-kubernetes-validations rules (CEL) that the API server evaluates on every create and "
              "update: an alias without family@version, an empty role, a Topology whose levels repeat. An object "
              "that breaks one is refused, so synth evaluates every rule of the schemas it checks (create "
              "semantics: defaults applied first, transition rules skipped) and stops on a failure.",
    fix="change the field the message names as the rule's message says (a JSON patch of the escape hatch, or "
        "a raw object in the fleet); if kubetrain's own output fails a rule, report it",
    source=cite(f"{CRDS}#validation-rules", "https://github.com/kubernetes/kubernetes/blob/v1.33.0/staging/src/"
                "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go"))

RULES_NOT_CHECKED = register(
    "KT606", "error", "CEL rules not checked: the object fails its schema",
    rationale="Like the API server, kubetrain evaluates a CRD's x-kubernetes-validations rules only on an object "
              "that passes the CRD's schema (a rule on a misspelt or mistyped field would only add noise); the "
              "object is refused either way, and more problems may show once the schema's are fixed.",
    fix="fix the schema problems reported for the same object; the rules are checked on the next run",
    source="https://github.com/kubernetes/kubernetes/blob/v1.33.0/staging/src/k8s.io/apiextensions-apiserver/pkg/"
           "registry/customresource/strategy.go")

_ABSENT = object()
_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_ESCAPABLE = re.compile(r"^[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*$")
_STRING_LITERALS = re.compile(r"""(?s)[rR]?(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""")
_OLD_SELF = re.compile(r"\boldSelf\b")
_MATCHES_CALL = re.compile(r"\bmatches(\s*\()")
_MAX_MESSAGE_BYTES = 5 * 1024  # k8s.io/apiserver/pkg/apis/cel: MaxEvaluatedMessageExpressionSizeBytes
_GO_DURATION = re.compile(r"^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$|^[-+]?0$")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def escape(name: str) -> str | None:
    """A property name as CEL reaches it (k8s.io/apiserver/pkg/cel/escaping.go); None when it cannot."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    return re.sub(r"__|[./-]", lambda m: _ESCAPES[m.group(0)], name)


def _code(rule: str, change: re.Pattern, into: str) -> str:
    """`rule` with `change` replaced outside its string literals."""
    out, last = [], 0
    for literal in _STRING_LITERALS.finditer(rule):
        out += [change.sub(into, rule[last:literal.start()]), literal.group(0)]
        last = literal.end()
    return "".join([*out, change.sub(into, rule[last:])])


def runnable(rule: str) -> str:
    """The rule as kubetrain compiles it: `matches` becomes `matchesRegex`, the same match (the RE2 pattern
    read as RE2 reads it) with the pattern compiled once; the runtime's `matches` compiles it on every
    call (~20 µs). Messages still show the rule as its CRD writes it."""
    return _code(rule, _MATCHES_CALL, r"matchesRegex\1")


def uses_old_self(rule: str) -> bool:
    """A transition rule references `oldSelf` (outside its string literals)."""
    return bool(_OLD_SELF.search(_STRING_LITERALS.sub("''", rule)))


def _type(schema: dict[str, Any]) -> str | None:
    found = schema.get("type")
    if isinstance(found, list):  # nullable, as kubetrain's strict schemas write it
        found = next((t for t in found if t != "null"), None)
    return found


# -- values as CEL sees them -------------------------------------------------------------------------------

Convert = Callable[[Any], Any]


class _Converter:
    """Turns an object's value at a schema node into the value a rule sees (defaults applied, names escaped,
    numbers and formats typed). Each schema node is compiled once into a function (None where its values
    need no change: no defaults, escapes, doubles or formats below it, so they are handed over as they
    are); an object is converted key by key of the value, not of its (often much larger) schema. Defaults
    are shared, not copied: the runtime copies what it is given, and nothing here changes them."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[int, bool], Convert | None] = {}
        self._plain: dict[int, bool] = {}

    def convert(self, schema: Any, value: Any, root: bool = False) -> Any:
        function = self.compiled(schema, root)
        return value if function is None or value is None else function(value)

    def compiled(self, schema: Any, root: bool = False) -> Convert | None:
        key = (id(schema), root)
        if key not in self._compiled:
            self._compiled[key] = None  # a schema that refers to itself converts below as it is
            self._compiled[key] = self._compile(schema, root)
        return self._compiled[key]

    def _plain_schema(self, schema: Any) -> bool:
        key = id(schema)
        if key not in self._plain:
            self._plain[key] = True  # (recursion guard)
            self._plain[key] = self._is_plain(schema)
        return self._plain[key]

    def _is_plain(self, schema: Any) -> bool:
        if not isinstance(schema, dict) or "$ref" in schema or schema.get("x-kubernetes-int-or-string"):
            return True
        if _type(schema) == "number" or schema.get("format") in ("date", "date-time", "duration", "byte"):
            return False
        if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-embedded-resource"):
            return False
        properties = schema.get("properties") or {}
        if any("default" in sub or escape(name) != name for name, sub in properties.items()):
            return False
        children = [*properties.values(), schema.get("items"), schema.get("additionalProperties")]
        return all(self._plain_schema(child) for child in children if isinstance(child, dict))

    def _compile(self, schema: Any, root: bool) -> Convert | None:
        if not isinstance(schema, dict) or (not root and self._plain_schema(schema)):
            return None
        if schema.get("x-kubernetes-int-or-string"):
            return None
        kind = _type(schema)
        if kind == "object":
            return self._object(schema, root or bool(schema.get("x-kubernetes-embedded-resource")))
        if kind == "array":
            items = self.compiled(schema.get("items"))
            if items is None:
                return None
            return lambda value: [None if x is None else items(x) for x in value] if isinstance(value, list) else value
        if kind == "number":
            return lambda value: float(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if kind == "string" and schema.get("format") in ("date", "date-time", "duration", "byte"):
            fmt = schema["format"]
            return lambda value: _formatted(fmt, value) if isinstance(value, str) else value
        return None

    def _object(self, schema: dict[str, Any], resource: bool) -> Convert:
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            values = self.compiled(additional)
            if values is None:
                return lambda value: value
            return lambda value: {k: None if v is None else values(v) for k, v in value.items()} \
                if isinstance(value, dict) else value
        # name -> (the CEL names it is reached by, its converter, its default or _ABSENT, nullable)
        fields: dict[str, tuple[tuple[str, ...], Convert | None, Any, bool]] = {}
        for name, sub in (schema.get("properties") or {}).items():
            escaped = escape(name)
            # Kubernetes also accepts `self.namespace` for `self.__namespace__`; an unescapable name is hidden.
            keys = () if escaped is None else (escaped, name) if name in _RESERVED else (escaped,)
            if resource and name == "metadata":
                continue
            fields[name] = (keys, self.compiled(sub), sub.get("default", _ABSENT) if isinstance(sub, dict) else
                            _ABSENT, isinstance(sub, dict) and _nullable(sub))
        defaults = [(name, entry) for name, entry in fields.items() if entry[2] is not _ABSENT]

        def convert(value: Any) -> Any:
            if not isinstance(value, dict):
                return value
            out: dict[str, Any] = {}
            for name, item in value.items():
                entry = fields.get(name)
                if entry is None:
                    continue  # undeclared: pruned by the API server (and refused by the schema check)
                keys, child, default, nullable = entry
                if item is None and default is not _ABSENT and not nullable:
                    item = default
                if item is not None and child is not None:
                    item = child(item)
                for key in keys:
                    out[key] = item
            for name, (keys, child, default, _) in defaults:
                if name not in value:
                    item = default if child is None else child(default)
                    for key in keys:
                        out[key] = item
            if resource:
                for name in ("apiVersion", "kind"):
                    if isinstance(value.get(name), str):
                        out[name] = value[name]
                metadata = value.get("metadata")
                if isinstance(metadata, dict):
                    out["metadata"] = {k: metadata[k] for k in ("name", "generateName")
                                       if isinstance(metadata.get(k), str)}
            return out

        return convert


def defaulted(schema: Any, value: Any) -> Any:
    """The value after structural defaulting: an absent (or, where not nullable, null) value with a
    default gets the default."""
    if isinstance(schema, dict) and "default" in schema and (
            value is _ABSENT or (value is None and not _nullable(schema))):
        return schema["default"]
    return value


def _nullable(schema: dict[str, Any]) -> bool:
    return bool(schema.get("nullable")) or (isinstance(schema.get("type"), list) and "null" in schema["type"])


def _formatted(fmt: Any, text: str) -> Any:
    """date/date-time as timestamps, duration as durations, byte as bytes; a string that does not parse
    stays a string (schema validation reports the format)."""
    try:
        if fmt in ("date", "date-time"):
            stamp = timestamp_pb2.Timestamp()
            when = datetime.fromisoformat(text.replace("Z", "+00:00") if fmt == "date-time" else f"{text}T00:00:00+00:00")
            stamp.FromDatetime(when)
            return stamp
        if fmt == "duration" and _GO_DURATION.match(text):
            sign = -1 if text.startswith("-") else 1
            seconds = sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"([0-9.]+)([a-zµμ]+)", text))
            span = duration_pb2.Duration()
            span.FromNanoseconds(round(sign * seconds * 1e9))
            return span
        if fmt == "byte":
            return base64.b64decode(text, validate=True)
    except ValueError:
        pass
    return text


# -- compiled rules ----------------------------------------------------------------------------------------

@dataclass
class _Rule:
    text: str
    program: Any  # None when it did not compile (`error` says why)
    error: str | None
    message: str
    message_program: Any
    field_path: str
    reason: str

    @property
    def error_string(self) -> str:
        """How the API server names the rule in errors: its message, else its text."""
        return self.message or self.text.strip()


@dataclass
class _Node:
    schema: dict[str, Any]
    root: bool
    rules: list[_Rule] = field(default_factory=list)
    properties: dict[str, _Node] = field(default_factory=dict)
    items: _Node | None = None
    additional: _Node | None = None

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.items or self.additional)


def _compile(rule: dict[str, Any]) -> _Rule | None:
    text = rule.get("rule")
    if not isinstance(text, str) or not text.strip():
        return None
    optional = rule.get("optionalOldSelf") is True
    if uses_old_self(text) and not optional:
        return None  # a transition rule: the API server evaluates it on update only
    program, error = None, None
    try:
        # On create, a rule with optionalOldSelf sees oldSelf as optional.none().
        program = (environment(bindings=True).compile(f"cel.bind(oldSelf, optional.none(), {runnable(text)})")
                   if optional and uses_old_self(text) else environment().compile(runnable(text)))
    except RuntimeError as failure:
        error = _status_text(str(failure))
    message_program = None
    if isinstance(rule.get("messageExpression"), str) and rule["messageExpression"].strip():
        try:
            message_program = environment().compile(runnable(rule["messageExpression"]))
        except RuntimeError:
            pass  # the API server would have refused the CRD; the static message stands in
    return _Rule(text, program, error, str(rule.get("message") or "").strip(), message_program,
                 _normalized_field_path(rule.get("fieldPath")), str(rule.get("reason") or "FieldValueInvalid"))


def _normalized_field_path(path: Any) -> str:
    """A rule's fieldPath (`.spec.x`, `.labels['a.b']`) as a field path suffix (`spec.x`, `labels[a.b]`)."""
    if not isinstance(path, str) or not path:
        return ""
    out = ""
    for name, key in re.findall(r"\.([^.\[\]]+)|\['((?:\\.|[^'\\])*)'\]", path):
        out += f".{name}" if name else f"[{key}]"
    return out.lstrip(".")


def _build(schema: Any, root: bool) -> _Node | None:
    if not isinstance(schema, dict):
        return None
    node = _Node(schema, root)
    sources = [schema, *[s for s in schema.get("allOf") or [] if isinstance(s, dict)]]
    for source in sources:
        node.rules += [c for r in source.get("x-kubernetes-validations") or [] if isinstance(r, dict)
                       if (c := _compile(r)) is not None]
    for name, sub in (schema.get("properties") or {}).items():
        if root and name == "metadata":
            continue  # ObjectMeta is checked by the API server's own rules, not the CRD's
        child = _build(sub, bool(isinstance(sub, dict) and sub.get("x-kubernetes-embedded-resource")))
        if child is not None:
            node.properties[name] = child
    for name in ("items", "additionalProperties"):
        sub = schema.get(name)
        child = _build(sub, bool(isinstance(sub, dict) and sub.get("x-kubernetes-embedded-resource")))
        if child is not None:
            setattr(node, "items" if name == "items" else "additional", child)
    return None if node.empty() else node


def _status_text(text: str) -> str:
    """cel-expr-python's error text without its status code (`NOT_FOUND: ...`, `... [INVALID_ARGUMENT]`)."""
    text = re.sub(r"^[A-Z_]+: ", "", text.strip())
    return re.sub(r"\s*\[[A-Z_]+\]$", "", text)


# -- evaluation --------------------------------------------------------------------------------------------

class RulePlan:
    """The compiled rules of one schema."""

    def __init__(self, root: _Node):
        self.root = root
        self.converter = _Converter()
        self.environment = environment()

    @classmethod
    def build(cls, schema: dict[str, Any]) -> RulePlan | None:
        """None when the schema has no rule the API server evaluates on create."""
        root = _build(schema, True)
        return cls(root) if root is not None else None

    def rules(self) -> Iterator[tuple[str, _Rule]]:
        """(schema path, rule) for every compiled rule: what the tests check compiles."""
        stack: list[tuple[str, _Node]] = [("", self.root)]
        while stack:
            path, node = stack.pop()
            yield from ((path, rule) for rule in node.rules)
            stack += [(f"{path}.{k}".lstrip("."), child) for k, child in node.properties.items()]
            stack += [(f"{path}[]", node.items)] if node.items else []
            stack += [(f"{path}[*]", node.additional)] if node.additional else []

    def failures(self, obj: Any) -> list[tuple[str, str]]:
        """(field path, message) for every rule `obj` fails."""
        found: list[tuple[str, str]] = []
        self._walk(self.root, obj, "", found)
        return found

    def _walk(self, node: _Node, value: Any, path: str, found: list[tuple[str, str]]) -> None:
        if value is None:
            return
        if node.rules:
            self._evaluate(node, value, path, found)
        if isinstance(value, dict):
            for name, child in node.properties.items():
                item = defaulted(child.schema, value.get(name, _ABSENT))
                if item is not _ABSENT:
                    self._walk(child, item, f"{path}.{name}" if path else name, found)
            if node.additional is not None:
                for key, item in value.items():
                    self._walk(node.additional, item, f"{path}[{key}]", found)
        elif isinstance(value, list) and node.items is not None:
            for i, item in enumerate(value):
                self._walk(node.items, item, f"{path}[{i}]", found)

    def _evaluate(self, node: _Node, value: Any, path: str, found: list[tuple[str, str]]) -> None:
        try:
            activation = self.environment.Activation({"self": self.converter.convert(node.schema, value, node.root)})
        except (RuntimeError, TypeError, ValueError) as error:  # a value the runtime cannot take
            found.append((path, f"cannot evaluate the rules here: {_status_text(str(error))}"))
            return
        for rule in node.rules:
            if rule.program is None:
                found.append((path, f"rule compile error: {rule.error}"))
                continue
            try:
                result = rule.program.eval(activation)
            except RuntimeError as error:  # the runtime's own failure (an unsupported value or type)
                found.append((path, _evaluation_error(str(error), rule)))
                continue
            if result.value() is True:  # the common case first: one call into the runtime
                continue
            if result.type() == cel.Type.ERROR:
                found.append((path, _evaluation_error(str(result.value()), rule)))
                continue
            where = ".".join(filter(None, [path, rule.field_path])) if not rule.field_path.startswith("[") else \
                f"{path}{rule.field_path}"
            found.append((where, _worded(rule.reason, self._message(rule, activation), rule)))

    @staticmethod
    def _message(rule: _Rule, activation: Any) -> str:
        if rule.message_program is not None:
            try:
                result = rule.message_program.eval(activation)
            except RuntimeError:
                result = None  # as when it evaluates to an error: the static message stands in
            if result is not None and result.type() == cel.Type.STRING:
                text = result.value().strip()
                if text and "\n" not in text and len(text.encode()) <= _MAX_MESSAGE_BYTES:
                    return text
        return rule.message or f"failed rule: {rule.text.strip()}"


def _evaluation_error(error: str, rule: _Rule) -> str:
    error = _status_text(error)
    if "No matching overloads" in error or "no matching overload" in error:
        return (f"'{error}': call arguments did not match a supported operator, function or macro signature for "
                f"rule: {rule.error_string}")
    return f"{error} evaluating rule: {rule.error_string}"


def _worded(reason: str, detail: str, rule: _Rule) -> str:
    """The detail as the API server words it for the rule's reason, with the rule when the message is the
    CRD author's own (so the user sees what was checked)."""
    shown = detail if detail.startswith("failed rule: ") else f"{detail} (rule: {rule.text.strip()})"
    return {"FieldValueForbidden": f"forbidden: {shown}", "FieldValueRequired": f"required: {shown}",
            "FieldValueDuplicate": f"duplicate value: {shown}"}.get(reason, shown)
