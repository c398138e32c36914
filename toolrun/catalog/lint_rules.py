"""The per-tool lint rules. Each yields RawFindings; ``lint`` adds tool, file and line.

Thresholds are module constants so docs/lint.md and the tests can name them; the figures
behind them (measured on the OpenAI API's 288 operations) are in docs/lint.md.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolrun.catalog.cjk import is_cjk
from toolrun.catalog.enum_types import enum_mismatch, schemas_with_items
from toolrun.catalog.tokens import token_estimate  # also what tools export shows
from toolrun.core.schema_dialects import SchemaChange, allows_null, to_gemini, to_openai_strict
from toolrun.core.text import counted
from toolrun.core.tool import Tool

if TYPE_CHECKING:
    from toolrun.catalog.lint import Severity

MIN_DESCRIPTION_WORDS = 10  # fewer words cannot say what, when and when not
CJK_CHARS_PER_WORD = 2  # a Chinese word is about two characters
LARGE_TOOL_TOKENS = 1000  # a single definition above this is worth trimming
PROPERTY_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")  # what Anthropic accepts as input_schema property keys
GEMINI_NAME_START = re.compile(r"^[A-Za-z_]")  # a Gemini function name starts with a letter or _ (OpenAI's may not)
HUGE_TOOL_TOKENS = 100_000  # above this a request cannot fit most models' context windows


def _compiled_at_first_use(source: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A getter of ``re.compile(source, flags)`` that compiles it once, at its first call.

    Compiling this module's patterns costs ~5 ms; a command that lints one tool needs few of them.
    """
    return functools.cache(lambda: re.compile(source, flags))


@dataclass(frozen=True)
class RawFinding:
    """A finding before it is placed: ``key_path`` is the dotted path of the tool's YAML key."""

    rule: str
    severity: Severity
    key_path: str
    message: str


# ---------------------------------------------------------------- descriptions


def word_count(text: str) -> int:
    """Words of ``text``: Latin words, plus CJK characters counted two per word."""
    if text.isascii():  # no CJK character: the words as they stand (most descriptions; a character loop costs 20x)
        return len(re.findall(r"[^\W\d_]+", text))
    latin = len(re.findall(r"[^\W\d_]+", "".join(" " if is_cjk(c) else c for c in text)))
    cjk = sum(1 for char in text if is_cjk(char))
    return latin + -(-cjk // CJK_CHARS_PER_WORD)


# Cues that a description says when (or when not) to use the tool.
USAGE_GUIDANCE = _compiled_at_first_use(
    r"\b(use (this|it|when|for|to|only|instead|with)|used (for|to|when)|useful (for|when)|"
    r"when (you|the|a|an|to|asked|looking|needed|there)|if (you|the)|only (for|when|if|use|works)|"
    r"do not|don'?t|never|instead|rather than|not (for|suitable|intended)|avoid|"
    r"for example|e\.g\.|such as|call (this|it) (when|to|before|after|if))\b"
    r"|用于|适用|适合|当[^。.,，;；]{0,15}时|如果|不要|请勿|仅|只能|不能|例如",  # 当…时 = when; 当前 = current
    re.IGNORECASE,
)


def description_findings(tool: Tool) -> Iterator[RawFinding]:
    """description-too-short, no-usage-guidance (missing descriptions are load errors)."""
    description = tool.description or ""
    if not description.strip():
        yield RawFinding(
            "description-too-short",
            "warning",
            "description",
            "description is empty; say what the tool does, when to use it and when not",
        )
        return
    words = word_count(description)
    if words < MIN_DESCRIPTION_WORDS:
        yield RawFinding(
            "description-too-short",
            "warning",
            "description",
            f"description has {counted(words, 'word')} (fewer than {MIN_DESCRIPTION_WORDS}): add what the tool "
            "returns, when to use it and when not to",
        )
        return  # one fix covers both: a longer description with guidance
    if not USAGE_GUIDANCE().search(description):
        yield RawFinding(
            "no-usage-guidance",
            "warning",
            "description",
            'description does not say when to use the tool: add a sentence like "Use this when ...; '
            'do not use it for ... (use OTHER_TOOL instead)"',
        )


# ---------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Parameter:
    """A property of the parameters schema, top-level or nested."""

    display: str  # "city", "address.street", "tags[].name"
    key_path: str  # "parameters.properties.city" (for the line)
    schema: Any


def iter_parameters(schema: Any, display: str = "", key_path: str = "parameters") -> Iterator[Parameter]:
    """Every property of ``schema``, depth first, nested objects and array items included."""
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            sub_display = f"{display}.{name}" if display else str(name)
            sub_path = f"{key_path}.properties.{name}"
            yield Parameter(sub_display, sub_path, sub)
            yield from iter_parameters(sub, sub_display, sub_path)
    items = schema.get("items")
    if isinstance(items, dict):
        yield from iter_parameters(items, f"{display}[]", f"{key_path}.items")


_TYPE_KEYWORDS = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref")
# Keywords that only make sense for one type: a schema using them without `type` means that type.
_KEYWORDS_OF_TYPE = {
    "object": ("properties", "additionalProperties", "patternProperties", "required", "minProperties", "maxProperties"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


def _implied_type(schema: dict[str, Any]) -> str | None:
    """The one type a schema's keywords imply ("items" -> array), or None when they imply none or several."""
    implied = [kind for kind, keywords in _KEYWORDS_OF_TYPE.items() if any(k in schema for k in keywords)]
    return implied[0] if len(implied) == 1 else None


# A list of values in prose: a cue, then at least two quoted values, or "one of a, b or c".
_VALUE_CUE = _compiled_at_first_use(
    r"\b(one of|either|possible values|allowed values|valid values|supported values|accepted values|"
    r"available values|values are|options are|must be|can be|should be|choose from|defaults? to)\b"
    r"|可选值|取值|之一|可以是",
    re.IGNORECASE,
)
_QUOTED_VALUE = _compiled_at_first_use(r"""[`'"“‘]([^`'"”’\s,]{1,40})[`'"”’]""")
_BARE_LIST = _compiled_at_first_use(
    r"\b(?:one of|either)[:\s]+([A-Za-z0-9_.-]{1,30})(?:\s*,\s*[A-Za-z0-9_.-]{1,30})*,?\s+(?:or|and)\s+[A-Za-z0-9_.-]{1,30}\b",
    re.IGNORECASE,
)


# "Allowed values: a, b, c." — a cue and a colon, then a comma-separated list of bare words.
_COLON_LIST = _compiled_at_first_use(
    r"\b(?:(?:allowed|possible|valid|supported|accepted|available) values|values|options|choices|one of)\s*:\s*"
    r"([A-Za-z0-9_.-]{1,30}(?:(?:\s*[,|]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+)[A-Za-z0-9_.-]{1,30})+)",
    re.IGNORECASE,
)


def prose_values(description: str) -> list[str]:
    """Values listed in a description ("one of `a`, `b`", "Allowed values: a, b, c."), or [] when it lists none."""
    bare = _BARE_LIST().search(description)
    if bare:
        listed = re.sub(r"^(one of|either)[:\s]+", "", bare.group(0), flags=re.IGNORECASE)
        return [value for value in re.split(r"[\s,]+", listed) if value.lower() not in ("or", "and")]
    colon = _COLON_LIST().search(description)
    if colon:
        values = [value.strip(".") for value in re.split(r"[\s,|]+", colon.group(1))]
        return [value for value in values if value and value.lower() not in ("or", "and")]
    cue = _VALUE_CUE().search(description)
    if not cue:
        return []
    values = list(dict.fromkeys(_QUOTED_VALUE().findall(description[cue.start() :])))
    return values if len(values) >= 2 else []


def _is_string_like(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind in (None, "string") or (isinstance(kind, list) and "string" in kind)


def parameter_findings(tool: Tool) -> Iterator[RawFinding]:
    """missing-parameter-type, parameter-name, openapi-nullable, parameter-missing-description, enum-in-prose."""
    for parameter in iter_parameters(tool.parameters):
        schema = parameter.schema
        if not isinstance(schema, dict):
            continue
        if not any(keyword in schema for keyword in _TYPE_KEYWORDS):
            implied = _implied_type(schema)
            fix = (
                f"add `type: {implied}` (its {implied} keywords say so)" if implied
                else "add `type:` (string, integer, number, boolean, array or object)"
            )
            yield RawFinding(
                "missing-parameter-type",
                "error",
                parameter.key_path,
                f"parameter {parameter.display!r} has no type: {fix} so the model knows what to send",
            )
        name = parameter.key_path.rsplit(".", 1)[-1]
        if parameter.key_path.endswith(f"properties.{name}") and not PROPERTY_NAME.match(name):
            suggestion = re.sub(r"[^a-zA-Z0-9_.-]+", "_", name).strip("_")[:64] or "value"
            yield RawFinding(
                "parameter-name",
                "warning",
                parameter.key_path,
                f"parameter name {name!r} is refused by Anthropic (property names must match "
                f"{PROPERTY_NAME.pattern}) and cannot be used in a template: rename it, e.g. {suggestion}",
            )
        if schema.get("nullable") is True and not allows_null(schema):
            declared = schema.get("type", "string")
            types = declared if isinstance(declared, list) else [declared]
            spelled = ", ".join([*map(str, types), '"null"'])
            yield RawFinding(
                "openapi-nullable",
                "warning",
                parameter.key_path,
                f"parameter {parameter.display!r} says nullable: true, which JSON Schema ignores (a null from the "
                f"model is rejected): write type: [{spelled}] and drop nullable",
            )
        description = schema.get("description")
        if not (isinstance(description, str) and description.strip()):
            yield RawFinding(
                "parameter-missing-description",
                "warning",
                parameter.key_path,
                f"parameter {parameter.display!r} has no description: say what it is, its format and an example",
            )
            continue
        if "enum" not in schema and "const" not in schema and _is_string_like(schema):
            values = prose_values(description)
            if values:
                listed = ", ".join(values[:6])
                yield RawFinding(
                    "enum-in-prose",
                    "warning",
                    parameter.key_path,
                    f"parameter {parameter.display!r} lists its values in prose ({listed}): declare them as "
                    "`enum: [...]` so the model cannot send anything else",
                )


def enum_type_findings(tool: Tool) -> Iterator[RawFinding]:
    """enum-type-mismatch: enum or const values the parameter's own type rejects (array items' too)."""
    for parameter in iter_parameters(tool.parameters):
        for display, key_path, schema in schemas_with_items(parameter.display, parameter.key_path, parameter.schema):
            message = enum_mismatch(display, schema)
            if message is not None:
                yield RawFinding("enum-type-mismatch", "warning", key_path, message)


# ---------------------------------------------------------------- prompt injection

INSTRUCTION_PATTERNS: list[tuple[Callable[[], re.Pattern[str]], str]] = [
    (
        _compiled_at_first_use(
            r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(the\s+|your\s+)?"
            r"(previous|prior|above|earlier|preceding|other|system)\s+(instructions|messages|prompts?|rules|directions)",
            re.IGNORECASE,
        ),
        "tells the model to ignore its instructions",
    ),
    (
        _compiled_at_first_use(r"\byou\s+(must|should|have\s+to)\s+always\s+(call|use|invoke|run)\b", re.IGNORECASE),
        "orders the model to always call a tool",
    ),
    (
        _compiled_at_first_use(
            r"\b(always|first)\s+(call|use|invoke|run)\s+this\s+tool\s+(first|before\s+(any|every|all))", re.IGNORECASE
        ),
        "orders the model to call this tool before anything else",
    ),
    (
        _compiled_at_first_use(
            r"\b(do\s+not|don'?t|never|without)\s+(tell|telling|inform|informing|mention|mentioning|reveal|revealing|"
            r"show|showing|notify|notifying)\s+(this\s+to\s+)?the\s+user",
            re.IGNORECASE,
        ),
        "asks the model to hide something from the user",
    ),
    (
        _compiled_at_first_use(
            r"\b(reveal|print|output|repeat|show|send|leak|ignore|override|forget)\b[^.]{0,20}\b(your|the)\s+"
            r"system\s+(prompt|message|instructions?)\b|\byour\s+system\s+(prompt|message|instructions?)\b",
            re.IGNORECASE,
        ),
        "talks about the system prompt",
    ),
    (
        _compiled_at_first_use(r"<\s*/?\s*(important|system|instructions?|admin)\s*>", re.IGNORECASE),
        "contains an instruction tag (<IMPORTANT>, <system>)",
    ),
    (
        _compiled_at_first_use(r"(忽略|无视)(之前|以上|先前|所有)[^。]{0,6}(指令|指示|说明|规则)|不要告诉用户|系统提示"),
        "contains instruction-like text (忽略之前的指令 / 不要告诉用户 / 系统提示)",
    ),
]


def _hidden_character_kind(text: str, index: int) -> str | None:
    """What kind of invisible character ``text[index]`` is, or None for a visible one."""
    code = ord(text[index])
    if 0xE0000 <= code <= 0xE007F:
        return "a Unicode tag character (invisible text)"
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or code in (0x200E, 0x200F, 0x061C):
        return "a bidirectional control character"
    if code == 0x200D:  # zero-width joiner: legitimate inside emoji sequences
        previous = ord(text[index - 1]) if index else 0
        if previous >= 0x1F000 or 0x2600 <= previous <= 0x27BF or previous == 0xFE0F:
            return None
        return "a zero-width character"
    if code in (0x200B, 0x200C, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x00AD, 0x180E):
        return "a zero-width character"
    if 0xE0100 <= code <= 0xE01EF:
        return "a variation selector (can smuggle hidden data)"
    return None


# Every character _hidden_character_kind may report: a fast first pass over long texts.
_MAYBE_HIDDEN = _compiled_at_first_use(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)


def hidden_characters(text: str) -> list[str]:
    """Descriptions of the invisible characters in ``text`` (``U+200B (a zero-width character)``)."""
    if text.isascii():  # every character _hidden_character_kind reports is past ASCII
        return []
    found: list[str] = []
    for match in _MAYBE_HIDDEN().finditer(text):
        index, char = match.start(), match.group(0)
        kind = _hidden_character_kind(text, index)
        if kind:
            name = unicodedata.name(char, "")
            found.append(f"U+{ord(char):04X}{' ' + name if name else ''} ({kind})")
    return list(dict.fromkeys(found))


def _texts_for_injection(tool: Tool) -> Iterator[tuple[str, str, str]]:
    """(what, key path, text) for every text the model sees."""
    yield "name", "name", tool.name
    yield "description", "description", tool.description or ""
    for parameter in iter_parameters(tool.parameters):
        schema = parameter.schema
        if not isinstance(schema, dict):
            continue
        yield f"parameter {parameter.display!r}", parameter.key_path, str(parameter.display)
        for key in ("description", "title"):
            if isinstance(schema.get(key), str):
                yield f"parameter {parameter.display!r} {key}", parameter.key_path, schema[key]
        for value in schema.get("enum", []) if isinstance(schema.get("enum"), list) else []:
            if isinstance(value, str):
                yield f"parameter {parameter.display!r} enum value", parameter.key_path, value


def injection_findings(tool: Tool) -> Iterator[RawFinding]:
    """prompt-injection: hidden Unicode and instruction-like text, both errors."""
    for what, key_path, text in _texts_for_injection(tool):
        hidden = hidden_characters(text)
        if hidden:
            yield RawFinding(
                "prompt-injection",
                "error",
                key_path,
                f"{what} contains invisible characters: {', '.join(hidden[:3])}"
                f"{' and more' if len(hidden) > 3 else ''}; remove them (they can carry instructions "
                "a reviewer cannot see)",
            )
        for pattern, meaning in INSTRUCTION_PATTERNS:
            match = pattern().search(text)
            if match:
                yield RawFinding(
                    "prompt-injection",
                    "error",  # a poisoned tool must not load silently
                    key_path,
                    f"{what} {meaning} ({match.group(0)!r}): describe what the tool does instead of "
                    "instructing the model; text like this is how tool poisoning works",
                )


# ---------------------------------------------------------------- backends


def _backend_placeholders(tool: Tool) -> set[str] | None:
    """Argument names the tool's templates use, or None when the backend is not available."""
    from toolrun.backends import get_backend

    try:
        return get_backend(tool.backend.kind).placeholders(tool)
    except Exception:  # a missing or broken backend is a load error, reported there
        return None


def backend_findings(tool: Tool) -> Iterator[RawFinding]:
    """The backend's own warnings (python-signature: an argument the function cannot always take)."""
    from toolrun.backends import get_backend

    try:
        warnings = get_backend(tool.backend.kind).warnings(tool)
    except Exception:  # a missing or broken backend is a load error, reported there
        return
    for warning in warnings:
        severity: Severity = "error" if warning.severity == "error" else "warning"
        yield RawFinding(warning.rule, severity, warning.key_path, warning.message)


def unused_parameter_findings(tool: Tool) -> Iterator[RawFinding]:
    """unused-parameter: a declared parameter no template uses (backends whose arguments go only through templates)."""
    from toolrun.backends import get_backend

    try:
        through_templates = get_backend(tool.backend.kind).arguments_through_templates
    except Exception:  # a missing or broken backend is a load error, reported there
        return
    if not through_templates:
        return  # e.g. python functions receive every argument
    used = _backend_placeholders(tool)
    if used is None:
        return
    for name in tool.parameters.get("properties", {}) or {}:
        if name not in used:
            yield RawFinding(
                "unused-parameter",
                "warning",
                f"parameters.properties.{name}",
                f"parameter {name!r} is declared but no template of the {tool.backend.kind} backend uses it: "
                f"use it (e.g. {{{{ {name} }}}}) or remove it — the model fills it in for nothing",
            )


def withheld_credential_findings(tool: Tool) -> Iterator[RawFinding]:
    """credentials-withheld: the toolset's credentials are for its base_url's origin, and this tool goes elsewhere."""
    withheld = tool.backend.withheld_credentials
    if not withheld:
        return
    names = ", ".join(f"{key} {name}" for key, entries in withheld for name in entries)
    yield RawFinding(
        "credentials-withheld", "warning", f"backend.{tool.backend.kind}.url",
        f"the toolset's credentials ({names}) are not sent: this tool's url is not on the origin of the "
        "toolset's base_url (or that origin cannot be told from the file); write them in the tool if it "
        "should send them there",
    )


# ---------------------------------------------------------------- provider schemas and cost


def _summarise(changes: list[Any], limit: int = 3) -> str:
    shown = "; ".join(str(change) for change in changes[:limit])
    return shown + (f"; and {len(changes) - limit} more" if len(changes) > limit else "")


def schema_compat_findings(tool: Tool) -> Iterator[RawFinding]:
    """strict-mode-incompatible and gemini-schema-incompatible, with what the export does."""
    strict = to_openai_strict(tool.parameters)
    if not strict.compatible:
        first = strict.incompatible[0]
        yield RawFinding(
            "strict-mode-incompatible",
            "info",
            _parameters_path(first),
            f"cannot use OpenAI strict mode: {_summarise(strict.incompatible)}; the strict export sends "
            "`strict: false` (close the object and list its properties to allow strict mode)",
        )
    else:
        dropped = [change for change in strict.changes if change.lossy]
        if dropped:
            yield RawFinding(
                "strict-mode-incompatible",
                "info",
                _parameters_path(dropped[0]),
                f"the OpenAI strict export changes the schema: {_summarise(dropped)}",
            )
    gemini = to_gemini(tool.parameters)
    lossy = [change for change in gemini.changes if change.lossy]
    if lossy:
        yield RawFinding(
            "gemini-schema-incompatible",
            "warning",
            _parameters_path(lossy[0]),
            f"Gemini cannot take this schema as is; the export loses: {_summarise(lossy)} — "
            "simplify the schema, or check the constraint in the tool itself",
        )


def gemini_name_findings(tool: Tool) -> Iterator[RawFinding]:
    """gemini-tool-name: a name OpenAI and Anthropic take and Gemini refuses (a leading digit or -)."""
    if GEMINI_NAME_START.match(tool.name):
        return
    suggestion = tool.name.lstrip("-")
    if not GEMINI_NAME_START.match(suggestion):
        suggestion = f"_{suggestion}"
    yield RawFinding(
        "gemini-tool-name",
        "warning",
        "name",
        f"name {tool.name!r} starts with {tool.name[0]!r}: Gemini refuses every request that offers this tool "
        f"(its function names start with a letter or _); rename it, e.g. {suggestion[:64]}",
    )


def _parameters_path(change: SchemaChange) -> str:
    """The tool key path of a schema change, for the finding's line."""
    return f"parameters.{change.path}" if change.path else "parameters"


def token_findings(tool: Tool) -> Iterator[RawFinding]:
    """token-cost: the estimated cost of the tool's definition in every request."""
    tokens = token_estimate(tool)
    if tokens > HUGE_TOOL_TOKENS:
        yield RawFinding(
            "token-cost",
            "error",
            "description",
            f"definition costs about {tokens} tokens, more than {HUGE_TOOL_TOKENS}: no model's context holds a "
            "request with it; shorten the description and the parameter descriptions",
        )
        return
    advice = " — large: shorten the descriptions or split the tool" if tokens > LARGE_TOOL_TOKENS else ""
    yield RawFinding(
        "token-cost",
        "info",
        "description",
        f"definition costs about {tokens} tokens in every request (estimate: ~4 characters per token){advice}",
    )


TOOL_RULES = (
    description_findings,
    parameter_findings,
    enum_type_findings,
    injection_findings,
    unused_parameter_findings,
    backend_findings,
    withheld_credential_findings,
    schema_compat_findings,
    gemini_name_findings,
    token_findings,
)


def tool_findings(tool: Tool) -> list[RawFinding]:
    """Every per-tool finding for ``tool``."""
    return [finding for rule in TOOL_RULES for finding in rule(tool)]
