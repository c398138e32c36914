"""YAML loading that remembers where every value came from, for file:line error messages.

PyYAML is imported on the first parse: a command whose files all come from a cache
(a recipe, a catalog) never pays for it.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import Problem

if TYPE_CHECKING:
    import yaml


class LineDict(dict):
    """A mapping from YAML that knows its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[Any, int]


class LineList(list):
    """A sequence from YAML that knows its own line and the line of each item (1-based)."""

    line: int = 0
    item_lines: list[int]


# Values plus characters once every alias is copied in: far above any real tool file; an alias
# bomb reaches billions of values, a string bomb (a long text aliased thousands of times) gigabytes.
MAX_EXPANDED_SIZE = 10_000_000


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How big ``node`` becomes once every alias is copied in: one per value plus the characters of
    each text (a shared node is measured once, and counted at every place it is used)."""
    import yaml

    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a recursive alias: count it once rather than loop
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
    else:
        size = 1 + len(str(node.value))
    sizes[id(node)] = size
    return size


class AliasLimit:
    """Refuses a document whose aliases would expand past MAX_EXPANDED_SIZE ("billion laughs").

    A mixin placed before a PyYAML loader class: ``class Loader(AliasLimit, yaml.CSafeLoader)``.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)  # type: ignore[call-arg]
        # No "&", no anchor, no alias: skip the count (most files; it costs ~10% of a load).
        self._may_alias = not isinstance(stream, str) or "&" in stream

    def construct_document(self, node: yaml.Node) -> Any:
        import yaml

        if self._may_alias and _expanded_size(node, {}) > MAX_EXPANDED_SIZE:
            raise yaml.constructor.ConstructorError(
                None, None, f"aliases expand to more than {MAX_EXPANDED_SIZE:,} values and characters", node.start_mark
            )
        return super().construct_document(node)  # type: ignore[misc]


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> LineDict:
    import yaml

    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


def _construct_timestamp_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    # JSON has no dates: `default: 2024-06-01` must stay the text written, or every JSON dump breaks.
    return loader.construct_scalar(node)


def _refuse_non_json_value(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    # bytes, sets and ordered pairs have no JSON form: no schema, template or JSON dump could use them.
    import yaml

    raise yaml.constructor.ConstructorError(
        None, None, f"{node.tag.rsplit(':', 1)[-1]} values (!!{node.tag.rsplit(':', 1)[-1]}) are not allowed here",
        node.start_mark,
    )


def construct_bounded_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """An int as PyYAML reads it; a number longer than Python reads is a ConstructorError at its line."""
    import yaml

    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:  # int() reads at most sys.get_int_max_str_digits() digits: a problem at its line
        raise yaml.constructor.ConstructorError(
            None, None, f"a number longer than {sys.get_int_max_str_digits()} digits", node.start_mark
        ) from None


INT_TAG = "tag:yaml.org,2002:int"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_NON_JSON_TAGS = tuple(f"tag:yaml.org,2002:{name}" for name in ("binary", "set", "omap", "pairs"))


def _add_constructors(loader: type[yaml.SafeLoader | yaml.CSafeLoader]) -> None:
    import yaml

    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
    loader.add_constructor(_TIMESTAMP_TAG, _construct_timestamp_as_text)
    loader.add_constructor(INT_TAG, construct_bounded_int)
    for tag in _NON_JSON_TAGS:
        loader.add_constructor(tag, _refuse_non_json_value)


@functools.cache
def _line_loaders() -> tuple[type[yaml.CSafeLoader] | None, type[yaml.SafeLoader]]:
    """The libyaml loader (None without libyaml: it parses several times faster, same marks) and
    the pure-Python one (it words its errors more precisely), both keeping lines."""
    import yaml

    class _LineLoader(AliasLimit, yaml.SafeLoader):
        pass

    _add_constructors(_LineLoader)
    if not getattr(yaml, "__with_libyaml__", False):
        return None, _LineLoader

    class _FastLineLoader(AliasLimit, yaml.CSafeLoader):
        pass

    _add_constructors(_FastLineLoader)
    return _FastLineLoader, _LineLoader


def load_yaml_file(path: Path) -> Any:
    """Parse one YAML file; a syntax error becomes a UserError-ready Problem (raised as YamlSyntaxError)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlSyntaxError(_not_utf8(path, exc)) from None
    except OSError as exc:
        fix = "fix or remove the symbolic link" if path.is_symlink() else "check the file's permissions"
        raise YamlSyntaxError(Problem(path, None, f"cannot read the file: {exc.strerror}", fix)) from None
    return load_yaml_text(text, path)


def _not_utf8(path: Path, error: UnicodeDecodeError) -> Problem:
    """The problem of a file that is not UTF-8, at the line of its first byte that is not (a UTF-16 file: line 1)."""
    data = error.object if isinstance(error.object, bytes) else b""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return Problem(path, 1, "UTF-16 text, not UTF-8", "save the file as UTF-8")
    line = data.count(b"\n", 0, error.start) + 1
    byte = data[error.start:error.start + 1].hex()
    return Problem(path, line, f"not UTF-8 text (byte 0x{byte}: {error.reason})",
                   "save the file as UTF-8 (from Windows-1252, say: iconv -f cp1252 -t utf-8)")


def load_yaml_text(text: str, path: Path | str) -> Any:
    try:
        return _load(text, path)
    except RecursionError:  # [[[[...]]]] thousands deep: the parser recurses once per level
        fix = "flatten the structure: a tool file needs a few levels, not hundreds"
        raise YamlSyntaxError(Problem(path, None, "the YAML is nested too deeply to read", fix)) from None


def _load(text: str, path: Path | str) -> Any:
    import yaml

    fast_loader, line_loader = _line_loaders()
    if fast_loader is not None:
        try:
            return yaml.load(text, Loader=fast_loader)  # noqa: S506 - a CSafeLoader
        except yaml.YAMLError:
            pass  # parse again below: the pure-Python loader words its errors more precisely
    try:
        return yaml.load(text, Loader=line_loader)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as exc:
        raise YamlSyntaxError(_syntax_problem(exc, path, text)) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(Problem(path, None, f"YAML error: {exc}", "fix the YAML syntax")) from None


_UNQUOTED_COLON_FIX = ('quote the whole value ("...") or write it as a block (key: >- and the text on the next '
                       'lines): in an unquoted value, ": " starts a new key')


_QUOTE_FIX = "close the quote on this line, or quote with the other kind ('...' or \"...\") when the text holds this one"


def _opened_quote(line: str) -> bool:
    """True when a value on ``line`` opens a quote that the line does not close."""
    opening = re.match(r"""^\s*(?:-\s+)?(?:[^\s#"'{\[][^#]*?:\s+)?(["'])""", line)
    if not opening:
        return False
    rest = line[opening.end():]
    if opening.group(1) == '"':
        return re.search(r'(?<!\\)"', rest) is None
    return "'" not in rest.replace("''", "")


def _unclosed_quote_line(text: str, before: int) -> int | None:
    """The first line (1-based) before ``before`` that opens a quote it does not close, or None."""
    for number, line in enumerate(text.splitlines()[: before - 1], start=1):
        if _opened_quote(line):
            return number
    return None


def _syntax_problem(exc: Any, path: Path | str, text: str) -> Problem:
    """The Problem of a YAML syntax error: at the line where the mistake starts, with a fix for the common ones."""
    import yaml

    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark else None
    what = exc.problem or str(exc)
    if exc.context and exc.context.startswith("while scanning a quoted scalar") and exc.context_mark:
        # The scanner reads on to the end of the file looking for the closing quote: the mistake is where it opened.
        end = f"line {line}" if line else "the end of the file"
        return Problem(path, exc.context_mark.line + 1,
                       f"YAML syntax error: a quoted text starts here and is not closed ({what} at {end})", _QUOTE_FIX)
    left_open = _open_bracket_problem(exc, path, line, what)
    if left_open is not None:
        return left_open
    opened = _unclosed_quote_line(text, line) if line and isinstance(exc, yaml.parser.ParserError) else None
    if opened:  # a quote left open swallows the lines up to the next quote, and the parser stumbles there
        return Problem(path, opened, f"YAML syntax error: the quote opened on this line is not closed on it "
                       f"(the parser stops at line {line}: {what})", _QUOTE_FIX)
    if exc.context:
        what = f"{exc.context}, {what}"
    what, fix = _worded(exc, what)
    return Problem(path, line, f"YAML syntax error: {what}", fix)


def _open_bracket_problem(exc: Any, path: Path | str, line: int | None, what: str) -> Problem | None:
    """A { or [ not closed where it should be, reported at the line that opened it; None for other errors.

    Never closed, the parser reads past the last line; left open at the end of its line, it stops at
    the next line's key, expecting a comma or the closing bracket."""
    if not (exc.context and exc.context.startswith("while parsing a flow") and exc.context_mark):
        return None
    bracket, closing = ("{", "}") if "mapping" in exc.context else ("[", "]")
    opened_at = exc.context_mark.line + 1
    if "<stream end>" in what:
        return Problem(path, opened_at, f"YAML syntax error: the {bracket} opened on this line is not closed before "
                       f"the file ends", f"close it with {closing} (or write the value in block style, one key per line)")
    if line and line > opened_at and what.startswith("expected ','"):
        return Problem(path, opened_at, f"YAML syntax error: the {bracket} opened on this line is still open at "
                       f"line {line}, where the parser {what}",
                       f"close it with {closing} on this line (a value written over several lines inside "
                       f"{bracket}…{closing} needs a , between its items)")
    return None


def _worded(exc: Any, what: str) -> tuple[str, str]:
    """The message and fix of a syntax error no quote explains: the common mistakes get their own."""
    import yaml

    fix = "fix the YAML syntax at this line"
    if what == "mapping values are not allowed here":
        fix = _UNQUOTED_COLON_FIX
    elif what.startswith("aliases expand"):
        fix = "write the values out, or use fewer nested aliases (*name)"
    elif isinstance(exc, yaml.constructor.ConstructorError) and "tag" in what or "!!" in what:
        fix = "remove the !! tag: write plain text, a number, true/false, a list or a mapping"
    elif "'\\t'" in what:
        what = "a tab character: YAML does not allow tabs for indentation"
        fix = "indent with spaces instead of tabs"
    elif isinstance(exc, yaml.constructor.ConstructorError) and what.startswith("duplicate key"):
        fix = "keep one of the two: YAML would silently drop the first"
    if exc.context and "flow" in exc.context:
        # {a: b} / [a, b] end a plain value at ? : , — a frequent surprise with prose values
        fix = 'quote the value ("...") or use block style: inside {…} and […] a ?, : or , ends an unquoted value'
    return what, fix


class YamlSyntaxError(Exception):
    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


def line_of(document: Any, path: Iterable[Any]) -> int | None:
    """The line of the value at ``path`` (keys and list indexes), or of its nearest parent."""
    line = getattr(document, "line", None) or None
    node = document
    for step in path:
        if isinstance(node, LineDict) and step in node:
            line = node.key_lines.get(step, line)
            node = node[step]
        elif isinstance(node, LineList) and isinstance(step, int) and 0 <= step < len(node):
            line = node.item_lines[step]
            node = node[step]
        else:
            break
    return line


def plain(value: Any) -> Any:
    """Deep copy into plain dicts and lists (for JSON output and schema libraries)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
