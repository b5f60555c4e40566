"""Argo's expressions as Argo evaluates them: expr (``{{=...}}``, ``valueFrom.expression``,
``retryStrategy.expression``), govaluate (``when``, with ``=~`` / ``!~`` over Go's RE2), the
``jsonpath()`` helper (evilmonkeyinc/jsonpath); each value below is the one Argo gives. Then
the feature workflows that use them, run end to end and linted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import gangway.argo as argo_pkg
from gangway.argo.expressions import ExprError, evaluate, expand_expression, when_holds
from gangway.argo.govaluate import WhenError
from gangway.argo.jsonpath import jsonpath
from gangway.argo.re2 import re2_search
from gangway.errors import UnsupportedConstruct
from gangway.lint import CrdSchemas, lint_manifest
from tests.argo_features._expected import SKIPPED, ok
from tests.helpers.runs import check_nodes, compiled, describe, run

pytestmark = pytest.mark.timeout(120)

DOC = '{"items": [{"name": "x", "size": 3}, {"name": "y", "size": 12}, {"name": "z"}]}'

EXPR: list[tuple[str, dict[str, str], Any]] = [
    ("1 + 2", {}, 3),
    ("4 / 2", {}, 2.0),  # / is always a float
    ("-7 % 3", {}, -1),  # Go truncates
    ("2 ** 3 ** 2", {}, 512.0),  # right-associative
    ("-2 ** 2", {}, -4.0),
    ("10 - 2 - 3", {}, 5),
    ("!true == false", {}, True),  # ! binds tighter than ==
    ("1 == 1.0", {}, True),
    ("'1' == 1", {}, False),
    ("[1, 2] == [1, 2]", {}, True),
    ("nil == nil", {}, True),
    ("1 < 2 < 3", {}, True),  # chained: 1 < 2 && 2 < 3
    ("3 < 2 < 5", {}, False),
    ("'abc' contains 'b' && 'abc' startsWith 'a' && 'abc' endsWith 'c'", {}, True),
    ("2 in [1, 2]", {}, True),
    ("'b' in {a: 1}", {}, False),
    ("true ? 'a' : 'b'", {}, "a"),
    ("false ? 1 : true ? 2 : 3", {}, 2),
    ("[1, 2, 3][-1]", {}, 3),
    ("[1, 2, 3][1:]", {}, [2, 3]),
    ("[1, 2, 3][-2:5]", {}, [2, 3]),
    ("filter([1, 2, 3], {# > 1})", {}, [2, 3]),
    ("filter([1, 2, 3], # > 1)", {}, [2, 3]),  # braces are optional
    ("map([1, 2], {# * 2})", {}, [2, 4]),
    ("map([10, 20], {# + #index})", {}, [10, 21]),
    ("map([{a: 1}, {a: 2}], {.a})", {}, [1, 2]),
    ("all([1, 2], {# > 0})", {}, True),
    ("all([], {# > 0})", {}, True),
    ("any([], {# > 0})", {}, False),
    ("none([1, 2], {# > 1})", {}, False),
    ("one([1, 2], {# > 1})", {}, True),
    ("count([1, 2, 3], {# != 2})", {}, 2),
    ("count([true, false, true])", {}, 2),
    ("len([1, 2, 3]) + len('abc') + len({a: 1})", {}, 7),
    ("asInt('07') + asInt(2.9)", {}, 9),
    ("asFloat('1.5') * 2", {}, 3.0),
    ("string(1.5) + string(2)", {}, "1.52"),
    ("toJson({b: 1, a: [1.5, 'x<y', nil]})", {}, '{"a":[1.5,"x\\u003cy",null],"b":1}'),
    ("toJson(jsonpath('{\"n\": 2}', '$.n'))", {}, "2"),  # JSON numbers are float64
    ("nil ?? 'd'", {}, "d"),
    ("inputs.parameters.gone ?? 'd'", {"inputs.parameters.a": "1"}, "d"),
    ("inputs.parameters.a ?? 'd'", {"inputs.parameters.a": "1"}, "1"),
    ("tasks.a?.outputs?.result ?? 'none'", {"tasks.b.status": "Succeeded"}, "none"),
    ("{a: nil}.a?.b.c", {}, None),  # a chain ends as a whole at the ?. on nil
    ("tasks['flip-coin'].outputs.result", {"tasks.flip-coin.outputs.result": "heads"}, "heads"),
    ('inputs.parameters["procs-per-node"]', {"inputs.parameters.procs-per-node": "4"}, "4"),
    # a parent key beside its children gives way to them (util/expand)
    ("len(inputs.parameters)", {"inputs.parameters": "[..]", "inputs.parameters.x": "1"}, 1),
    (  # || short-circuits: asInt('') never runs
        "lastRetry.status == 'Error' || asInt(lastRetry.exitCode) > 1",
        {"lastRetry.status": "Error", "lastRetry.exitCode": ""},
        True,
    ),
    (
        "map(filter(jsonpath(j, '$.items'), {.size > 2}), {.name})",
        {"j": '{"items": [{"name": "a", "size": 1}, {"name": "b", "size": 5}]}'},
        ["b"],
    ),
]


@pytest.mark.parametrize(("expr", "scope", "value"), EXPR, ids=[e[0] for e in EXPR])
def test_expr_values(expr: str, scope: dict[str, str], value: Any) -> None:
    got = evaluate(expr, scope)
    assert got == value and type(got) is type(value), got


TAGS = [
    ("4 / 2", "2"),
    ("10 / 4", "2.5"),
    ("1e6 * 1.0", "1e+06"),
    ("123456.0 + 0.5", "123456.5"),
    ("0.00001 * 1", "1e-05"),
    ("2 ** 10", "1024"),
    ("filter([1, 2, 3], {# > 1})", "[2 3]"),
    ("{b: 'x', a: true}", "map[a:true b:x]"),
    ("1 > 2", "false"),
    ("true ? 'yes' : 'no'", "yes"),
    ("toJson(map([1, 2], {# * 1.5}))", "[1.5,3]"),
]


@pytest.mark.parametrize(("expr", "text"), TAGS, ids=[t[0] for t in TAGS])
def test_tags_print_as_go_prints(expr: str, text: str) -> None:
    """A ``{{=...}}`` tag becomes Go's ``%v`` of its value."""
    assert expand_expression(expr, {}) == text


FAILS = [
    ("'a' + 1", "mismatched types string and int"),
    ("inputs.parameters.n + 1", "mismatched types string and int"),  # parameters are strings
    ("tasks.nope.outputs.result", "cannot fetch outputs from <nil>"),
    ("1 % 0", "integer divide by zero"),
    ("asInt('2.5')", r"int\(2.5\)"),
    ("true && 'x'", "needs a boolean"),
    ("[1][3]", "index out of range"),
    ("filter('abc', {# > 1})", "takes only array"),
    ("jsonpath(inputs.parameters.n, '$.a')", "key 'a' not found"),
    ("jsonpath('{', '$.a')", "not JSON"),
    ("nope == 1", "unknown variable 'nope'"),
    ("tasks.flip-coin.outputs.result", r"tasks\['flip-coin'\]"),
]


@pytest.mark.parametrize(("expr", "match"), FAILS, ids=[f[0] for f in FAILS])
def test_expr_errors_are_argo_errors(expr: str, match: str) -> None:
    scope = {"inputs.parameters.n": "4", "tasks.a.status": "Succeeded"}
    with pytest.raises(ExprError, match=match):
        evaluate(expr, scope)


REFUSED = [
    ("sprig.trim(' a ')", r"sprig functions \(sprig.trim\)"),
    ("'a' matches 'b'", "the matches operator"),
    ("[1] | len()", "the pipe operator"),
    ("let x = 1; x", "let"),
    ("upper('a')", r"the function upper\(\)"),
    ("1 not in [1]", "'not in'"),
    ("x ?: 1", r"the \?: operator"),
    ("reduce([1], #acc + #)", r"reduce\(\)"),
    ("map([1], #acc)", "#acc"),
    ("'a'.foo()", "method calls"),
    ("1..3", r"the range operator \(\.\.\)"),
    ("# > 1", "outside predicate"),
    ("1 ?? 2 + 3", "cannot be mixed"),
    ("__import__('os')", r"__import__\(\)"),
]


@pytest.mark.parametrize(("expr", "match"), REFUSED, ids=[r[0] for r in REFUSED])
def test_what_is_not_run_is_refused_by_name(expr: str, match: str) -> None:
    with pytest.raises(UnsupportedConstruct, match=match):
        evaluate(expr, {"x": "1"})


def test_a_tag_argo_splits_at_its_first_question_mark_is_refused() -> None:
    """Argo evaluates a tag holding ``?`` and ``:`` as ``COND ? ...`` split at its first
    ``?``: harmless for an outermost ternary, not for ``??`` or ``?.`` beside a ``:``."""
    assert expand_expression("1 > 0 ? 'a:b' : 'c'", {}) == "a:b"
    for tag in ("x ?? 'a:b'", "{a: 1}?.a ?? 2", "(true ? 1 : 2) == 1 ? 'y' : 'n'"):
        with pytest.raises(UnsupportedConstruct, match="first '\\?'"):
            expand_expression(tag, {"x": "1"})
    with pytest.raises(ExprError, match="nil"):
        expand_expression("nil", {})


WHEN = [
    ("heads == heads", True),
    ("heads != tails", True),
    ("1 == 1.0", True),  # all numbers are float64
    ("'1' == 1", False),
    ("10 > 9", True),
    ("'10' > '9'", False),  # two strings compare as strings
    ("abc < abd", True),
    ("true && !false", True),
    ("(1 + 2) * 3 == 9 && 2 ** 3 == 8 && 7 % 4 == 3", True),
    ("'a' + 1 == a1", True),
    ("3 in (1, 2, 3)", True),
    ("x in (a, b)", False),
    ("[a b] == 'a b'", True),
    ("true ? false : true", False),
    ("v12 =~ '^v[0-9]+$'", True),
    ("'v12' =~ '^v\\\\d+$'", True),  # the condition text holds \\d: the pattern is \d
    ("'v12' =~ '^v\\d+$'", False),  # a lone backslash escapes 'd': the pattern is ^vd+$
    ("abc !~ b", False),
    ("'eu-west' =~ '^eu-' && 'eu-west' !~ '[0-9]$'", True),
    ("", True),
]


@pytest.mark.parametrize(("cond", "holds"), WHEN, ids=[w[0] or "empty" for w in WHEN])
def test_when_as_govaluate_reads_it(cond: str, holds: bool) -> None:
    assert when_holds(cond) is holds


WHEN_FAILS = [
    ("a==-1", "invalid token '==-'"),
    ("foo-bar == foo-bar", "not a number"),
    ("v1.2 == v1.2", "field access"),
    ("hello world == hello world", "unexpected 'world'"),
    ("a < 1", "not a number"),
    ("1", "expected a boolean"),
    ("'x' =~ 1", "a string on each side"),
    ("'a' && true", "two booleans"),
    ("(a == a", "it ends where a value is expected"),
    ("a == a)", "unexpected"),
]


@pytest.mark.parametrize(("cond", "match"), WHEN_FAILS, ids=[w[0] for w in WHEN_FAILS])
def test_when_that_govaluate_rejects_fails(cond: str, match: str) -> None:
    with pytest.raises(WhenError, match=match):
        when_holds(cond)


def test_when_refuses_what_it_would_misread() -> None:
    with pytest.raises(UnsupportedConstruct, match="as a date"):
        when_holds("'2024-01-01' == today")
    with pytest.raises(UnsupportedConstruct, match="look-around"):
        when_holds("abc =~ '(?=a)'")


RE2 = [
    ("c$", "abc\n", False),  # $ is the end of the text (Python's would match before \n)
    ("(?m)^b$", "a\nb\nc", True),
    ("\\d", "٣", False),  # ASCII digits only
    ("\\s", "\v", False),  # no \v in Go's \s
    ("\\bfoo\\b", "éfoo", True),  # an ASCII word boundary
    ("(?<n>a)b", "ab", True),
    ("\\Qa.b\\E", "axb", False),
    ("[[:digit:]]+", "x7", True),
    ("\\x{41}", "A", True),
    ("a\\z", "a\n", False),
    ("(?i)NIGHTLY", "nightly-3", True),
    ("a.b", "a\nb", False),
    ("[]a]", "]", True),
]


@pytest.mark.parametrize(("pattern", "text", "found"), RE2, ids=[r[0] for r in RE2])
def test_regexps_match_as_go_matches(pattern: str, text: str, found: bool) -> None:
    assert re2_search(pattern, text, where="t") is found


@pytest.mark.parametrize(
    "pattern", ["(?=a)", "(?<=a)b", "(a)\\1", "a++", "\\pL", "x{,3}", "(?U)a", "\\Z", "a{1001}"]
)
def test_regexps_go_rejects_or_python_reads_differently_are_refused(pattern: str) -> None:
    with pytest.raises(UnsupportedConstruct, match="regexp"):
        re2_search(pattern, "a", where="t")


JSONPATH = [
    ("$.items[0].name", "x"),
    ("$.items[-1].name", "z"),
    ("$.items.length", 3),
    ("$.items[*].name", ["x", "y", "z"]),
    ("$.items[*].size", [3.0, 12.0]),  # z has none: left out
    ('$.items[?(@.name=="y")].size', [12.0]),
    ("$.items[?(@.name == 'y')]", [{"name": "y", "size": 12.0}]),
    ("$.items[?(@.size > 5)].name", ["y"]),
    ("$.items[?(@.size >= 3 && @.size < 10)].name", ["x"]),
    ("$.items[?(@.size < 5 || @.name == 'z')].name", ["x"]),  # || runs both: z fails @.size
    ("$.items[?(@.name != 'x')].name", ["y", "z"]),
    ("$.items[?(@.size)][0].name", "x"),  # an index picks among the matches
    ("$.items[?(@.size == '3')]", []),  # a string is never equal to a number
    ("$.items[?(@.size == 3.0)].name", ["x"]),
    ("$.items[?(@.name > 'a')]", []),  # < and > want numbers
]


@pytest.mark.parametrize(("path", "value"), JSONPATH, ids=[j[0] for j in JSONPATH])
def test_jsonpath_as_argo_reads_it(path: str, value: Any) -> None:
    assert jsonpath(DOC, path) == value


def test_jsonpath_filter_literals_and_truth() -> None:
    doc = '{"a": [{"k": null}, {"k": false}, {"k": true}, {"k": 0}, {"k": ""}, {"k": "v"}, {}]}'
    assert jsonpath(doc, "$.a[?(@.k == null)]") == [{"k": None}]
    assert jsonpath(doc, "$.a[?(@.k == false)]") == [{"k": False}]
    assert jsonpath(doc, "$.a[?(@.k)]") == [{"k": True}, {"k": "v"}]
    assert jsonpath('{"b": {"k": 2}, "a": {"k": 1}}', "$[?(@.k > 0)].k") == [1.0, 2.0]
    with pytest.raises(ValueError, match="not found"):
        jsonpath(DOC, "$.nope")


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ("$..name", "recursive"),
        ("$.items[0,1]", "unions"),
        ("$.items[0:2]", "ranges"),
        ('$["items"]', "write \\['key'\\]"),
        ("$.items[?(@.name =~ 'x')]", "=~"),
        ("$.items[?(@.size + 1 > 2)]", "arithmetic"),
        ("$.items[(@.length-1)]", "scripts"),
        ("items", "expected \\$ or @"),
    ],
)
def test_jsonpath_refuses_what_it_does_not_read(path: str, match: str) -> None:
    with pytest.raises(UnsupportedConstruct, match=match):
        jsonpath(DOC, path)


def test_nothing_is_handed_to_python_eval() -> None:
    """The evaluators walk their own trees: no ``eval``/``exec``/``compile`` anywhere."""
    for path in Path(argo_pkg.__file__).parent.glob("*.py"):
        assert not re.search(r"(?<![.\w])(eval|exec|compile)\(", path.read_text()), path.name


FEATURES = {
    "when_regex": {
        "version": ok("v1.24.3"),
        "release": ok("release"),
        "not-rc": ok("final"),
        "nightly": SKIPPED,
        "zone(0:eu-west)": ok("eu-west"),
        "zone(1:us-east)": SKIPPED,
        "zone(2:eu-north1)": SKIPPED,
    },
    "expr_filter_coalesce": {
        "disks": ok(),
        "big-names": ok('["b","c"]'),
        "big-go": ok("[b c]"),
        "count": ok("2/2"),
        "quantifiers": ok("true true false true"),
        "indexed": ok("[10,21]"),
        "owners": ok("nobody-ops"),
        "colour": ok("grey"),
    },
    "jsonpath_filter": {
        "inventory": ok(),
        "pick": ok('["42"]'),
        "large": ok('["y"]'),
        "between": ok('["x"]'),
        "not-x": ok('["y","z"]'),
        "first": ok("42"),
        "when-large": ok("large"),
        "when-huge": SKIPPED,
    },
}


@pytest.mark.parametrize("module", sorted(FEATURES))
def test_feature_workflows_end_as_argo_ends_them(module: str, tmp_path: Path) -> None:
    res = run(module, tmp_path)
    assert res.phase == "Succeeded", describe(res)
    check_nodes(res, FEATURES[module])


@pytest.mark.parametrize("module", sorted(FEATURES))
def test_the_linter_accepts_these_expressions(module: str, schemas: CrdSchemas) -> None:
    found = lint_manifest(compiled(module), schemas, platform=False)
    assert found == [], "\n".join(map(str, found))
