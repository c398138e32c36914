"""Which tools a text is about: a lexical ranking of a catalog, fast, deterministic, no model.

BM25F (Robertson et al., "Simple BM25 extension to multiple weighted fields", CIKM 2004): a
tool is four fields — its name, its description, its parameters' names and their
descriptions (with enum values) — each with its own weight and length normalisation; the
weighted term frequencies are summed before BM25's saturation, so a word repeated across
fields does not count as many unrelated hits. Terms are those of the near-duplicate lint
(``similarity.tokenize``: camelCase, snake_case and dotted names split, stopwords dropped,
CJK as characters and bigrams), lightly stemmed so "forecasts" finds "forecast". A name's
whole words also count as the query's words in the name field, which is where a question's
"weather" most often points.

Scores depend only on the catalog and the text: the same ranking on every machine.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrun.catalog.similarity import tokenize
from toolrun.core.tool import Tool

# Tuned on half of a public function-calling benchmark (benchmarks/tool_selection.py), held out on the other.
FIELD_WEIGHTS = {"name": 3.0, "description": 1.0, "parameter_names": 1.0, "parameter_text": 0.4}
FIELD_LENGTH_NORMALISATION = {"name": 0.3, "description": 0.75, "parameter_names": 0.5, "parameter_text": 0.75}
NAME_COVERAGE_WEIGHT = 1.0  # bonus for a tool whose name's words the text says, by their idf share
FEEDBACK_TOOLS = 3  # pseudo-relevance feedback: terms of this many best tools join the query
FEEDBACK_TERMS = 10
FEEDBACK_MIN_CATALOG = 100  # in a small catalog the best three are a large share of it: feedback only blurs
FEEDBACK_WEIGHT = 0.3
SATURATION = 1.2  # BM25's k1: how fast repeated hits stop adding
# (suffix, minimum letters left, replacement): the common English endings, longest first.
_SUFFIX_RULES = (("ations", 3, "ate"), ("ation", 3, "ate"), ("ings", 3, ""), ("ing", 3, ""), ("ies", 2, "y"),
                 ("ied", 2, "y"), ("sses", 2, "ss"), ("ches", 2, "ch"), ("shes", 2, "sh"), ("xes", 2, "x"),
                 ("ers", 5, ""), ("er", 5, ""), ("eed", 99, ""), ("ed", 3, ""), ("ly", 4, ""), ("s", 3, ""))
_KEPT_ENDINGS = ("ss", "us", "is")  # "address", "status", "analysis" are not plurals
# Words a question asks with, and the words a tool that answers it uses instead.
QUESTION_SYNONYMS = {
    "when": ("date", "time"), "where": ("location", "place"), "who": ("person", "name"),
    "today": ("current",), "now": ("current",), "latest": ("current",),
}
SYNONYM_WEIGHT = 0.5
_WORD = re.compile(r"[a-z]+")
_MAX_PARAMETER_DEPTH = 4  # nested objects below this add nothing a question names
# What a kept index's packed arrays mean: read back only by a toolrun that packs them the same way.
_STATE_FORMAT = f"1:{sys.byteorder}:{array('i').itemsize}:{array('d').itemsize}"


@dataclass(frozen=True)
class ToolText:
    """What the ranking reads of a tool: its name, description and JSON-Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, tool: Tool) -> ToolText:
        return cls(tool.name, tool.description, tool.parameters)


@dataclass(frozen=True)
class RankedTool:
    """A tool's name and its score for a text (higher is more relevant; 0 shares no term)."""

    name: str
    score: float


@functools.lru_cache(maxsize=65536)  # a catalog repeats its words: most of an index's build was stemming them
def stem(term: str) -> str:
    """A light English stem: one common ending off, a doubled last consonant and a final "e" dropped.

    "locations", "located" and "locate" all become "locat"; never shorter than three letters.
    """
    if term.endswith(_KEPT_ENDINGS) or len(term) < 4:
        return term
    for suffix, minimum, replacement in _SUFFIX_RULES:
        if not term.endswith(suffix):
            continue
        if len(term) - len(suffix) >= minimum:  # the longest ending decides, even when too short to take off
            term = term[: -len(suffix)] + replacement
            if not replacement and len(term) > 3 and term[-1] == term[-2] and term[-1] not in "lsz":
                term = term[:-1]  # "running" -> "run"
        break
    return term[:-1] if len(term) > 3 and term.endswith("e") else term


def terms(text: str) -> list[str]:
    """The stemmed terms of ``text``, in order."""
    return [stem(term) for term in tokenize(text)]


def _parameter_fields(schema: Any, depth: int = 0) -> tuple[list[str], list[str]]:
    """The names and the descriptive texts (descriptions, enum values) of a schema's properties."""
    names: list[str] = []
    texts: list[str] = []
    if not isinstance(schema, dict) or depth > _MAX_PARAMETER_DEPTH:
        return names, texts
    properties = schema.get("properties")
    for name, child in (properties.items() if isinstance(properties, dict) else ()):
        names.append(str(name))
        if isinstance(child, dict):
            texts.extend(str(child[key]) for key in ("description", "title") if isinstance(child.get(key), str))
            texts.extend(str(value) for value in child.get("enum") or () if isinstance(value, str | int))
            child_names, child_texts = _parameter_fields(child.get("items", child), depth + 1)
            names.extend(child_names)
            texts.extend(child_texts)
    return names, texts


def _field_terms(tool: ToolText) -> dict[str, list[str]]:
    names, texts = _parameter_fields(tool.parameters)
    return {
        "name": terms(tool.name),
        "description": terms(tool.description),
        "parameter_names": terms(" ".join(names)),
        "parameter_text": terms(" ".join(texts)),
    }


class ToolIndex:
    """An inverted index of a catalog for BM25F ranking; build once, rank many texts.

    Held packed (term ids and weights as machine arrays, unpacked per term a text uses), so an
    index kept on disk (``state``, ``from_state``) is read back in milliseconds, not built again.
    """

    def __init__(self, tools: Iterable[ToolText]) -> None:
        documents = [(tool.name, _field_terms(tool)) for tool in tools]
        average = {name: sum(len(fields[name]) for _, fields in documents) / max(len(documents), 1) or 1.0
                   for name in FIELD_WEIGHTS}
        term_ids: dict[str, int] = {}
        postings: list[tuple[array[int], array[float]]] = []
        packed_documents: list[tuple[bytes, bytes]] = []
        name_terms: list[bytes] = []
        for index, (_, fields) in enumerate(documents):
            weights = _weighted_frequencies(fields, average)
            ids = array("i", (term_ids.setdefault(term, len(term_ids)) for term in weights))
            packed_documents.append((ids.tobytes(), array("d", weights.values()).tobytes()))
            name_terms.append(array("i", (term_ids[term] for term in dict.fromkeys(fields["name"]))).tobytes())
            for term_id, weight in zip(ids, weights.values(), strict=True):
                if term_id == len(postings):
                    postings.append((array("i"), array("d")))
                postings[term_id][0].append(index)
                postings[term_id][1].append(weight)
        count = len(documents)
        idf = array("d", (math.log(1 + (count - len(indexes) + 0.5) / (len(indexes) + 0.5)) for indexes, _ in postings))
        self._adopt([name for name, _ in documents], list(term_ids), idf,
                    [(indexes.tobytes(), weights.tobytes()) for indexes, weights in postings], packed_documents, name_terms)

    def _adopt(self, names: list[str], vocabulary: list[str], idf: array[float], postings: list[tuple[bytes, bytes]],
               documents: list[tuple[bytes, bytes]], name_terms: list[bytes]) -> None:
        self.names = names
        self._vocabulary = vocabulary
        self._term_ids = {term: term_id for term_id, term in enumerate(vocabulary)}
        self._idf = idf
        self._packed_postings = postings
        self._postings: dict[int, tuple[array[int], array[float]]] = {}  # unpacked on first use
        self._documents = documents
        self._name_terms = name_terms
        self._name_mass: dict[int, float] = {}  # per tool, on first use

    @classmethod
    def of_tools(cls, tools: Iterable[Tool]) -> ToolIndex:
        return cls(ToolText.of(tool) for tool in tools)

    def state(self) -> tuple[Any, ...]:
        """The index as plain values ``marshal`` can write: ``from_state`` reads them back."""
        return (_STATE_FORMAT, self.names, self._vocabulary, self._idf.tobytes(), self._packed_postings,
                self._documents, self._name_terms)

    @classmethod
    def from_state(cls, state: Any) -> ToolIndex:
        """The index ``state`` gave; ValueError when it is not one (another format, a damaged value)."""
        try:
            form, names, vocabulary, idf_bytes, postings, documents, name_terms = state
            if form != _STATE_FORMAT or not (len(names) == len(documents) == len(name_terms)) \
                    or not len(vocabulary) == len(postings):
                raise ValueError("not a ranking index of this toolrun")
            idf = array("d")
            idf.frombytes(idf_bytes)
            if len(idf) != len(vocabulary):
                raise ValueError("a damaged ranking index")
        except (TypeError, ValueError) as error:
            raise ValueError(f"not a ranking index: {error}") from None
        index = cls.__new__(cls)
        index._adopt(list(names), list(vocabulary), idf, list(postings), list(documents), list(name_terms))
        return index

    def rank(self, text: str, limit: int | None = None) -> list[RankedTool]:
        """Tools by relevance to ``text``, best first; ties and tools sharing no term keep catalog order."""
        scores = self.scores(text)
        order = sorted(range(len(self.names)), key=lambda index: -scores[index])
        return [RankedTool(self.names[index], round(scores[index], 4)) for index in order[:limit]]

    def scores(self, text: str) -> list[float]:
        """Each tool's score for ``text``, in catalog order."""
        query = query_weights(text)
        scores = self._scores(query)
        if len(self.names) >= FEEDBACK_MIN_CATALOG:
            expanded = self._feedback_terms(query, scores)
            if expanded:
                scores = self._scores({**expanded, **query})
        return scores

    def _scores(self, query: dict[str, float]) -> list[float]:
        scores = [0.0] * len(self.names)
        asked: set[int] = set()
        for term, query_weight in query.items():
            term_id = self._term_ids.get(term)
            if term_id is None:
                continue
            asked.add(term_id)
            idf = self._idf[term_id]
            indexes, weights = self._posting(term_id)
            for index, weight in zip(indexes, weights, strict=True):
                scores[index] += query_weight * idf * weight / (SATURATION + weight)
        if NAME_COVERAGE_WEIGHT:
            for index, score in enumerate(scores):
                if score > 0:
                    covered = sum(self._idf[term_id] for term_id in _ids(self._name_terms[index]) if term_id in asked)
                    scores[index] += NAME_COVERAGE_WEIGHT * covered / self._mass_of_name(index)
        return scores

    def _posting(self, term_id: int) -> tuple[array[int], array[float]]:
        posting = self._postings.get(term_id)
        if posting is None:
            indexes, weights = self._packed_postings[term_id]
            posting = self._postings[term_id] = (_ids(indexes), _floats(weights))
        return posting

    def _mass_of_name(self, index: int) -> float:
        mass = self._name_mass.get(index)
        if mass is None:
            mass = self._name_mass[index] = sum(self._idf[term_id] for term_id in _ids(self._name_terms[index])) or 1.0
        return mass

    def _feedback_terms(self, query: dict[str, float], scores: list[float]) -> dict[str, float]:
        """Pseudo-relevance feedback: the telling terms of the best few tools, at a fraction of a word's weight."""
        best = heapq.nlargest(FEEDBACK_TOOLS, (index for index in range(len(scores)) if scores[index] > 0),
                              key=scores.__getitem__)
        pooled: dict[str, float] = defaultdict(float)
        for index in best:
            term_ids, weights = self._documents[index]
            for term_id, weight in zip(_ids(term_ids), _floats(weights), strict=True):
                term = self._vocabulary[term_id]
                if term not in query:
                    pooled[term] += self._idf[term_id] * weight / (SATURATION + weight)
        top = heapq.nlargest(FEEDBACK_TERMS, pooled.items(), key=lambda item: item[1])
        if not top:
            return {}
        strongest = top[0][1]
        return {term: FEEDBACK_WEIGHT * weight / strongest for term, weight in top}


def _ids(packed: bytes) -> array[int]:
    ids = array("i")
    ids.frombytes(packed)
    return ids


def _floats(packed: bytes) -> array[float]:
    floats = array("d")
    floats.frombytes(packed)
    return floats


def query_weights(text: str) -> dict[str, float]:
    """The terms of a question and how much each counts: a word said twice more, not twice as much."""
    weights = {term: 1.0 + math.log(repeats) for term, repeats in Counter(terms(text)).items()}
    for word in _WORD.findall(text.lower()):
        for synonym in QUESTION_SYNONYMS.get(word, ()):
            synonym_term = stem(synonym)
            weights[synonym_term] = max(weights.get(synonym_term, 0.0), SYNONYM_WEIGHT)
    return weights


def _weighted_frequencies(fields: dict[str, list[str]], average: dict[str, float]) -> dict[str, float]:
    """BM25F's pseudo term frequency of each term of one tool: per-field counts, normalised and weighted."""
    combined: dict[str, float] = defaultdict(float)
    for name, field_terms in fields.items():
        normalise = FIELD_LENGTH_NORMALISATION[name]
        length_factor = 1.0 - normalise + normalise * len(field_terms) / average[name]
        for term, count in Counter(field_terms).items():
            combined[term] += FIELD_WEIGHTS[name] * count / length_factor
    return combined


def rank_tools(tools: Sequence[Tool], text: str, limit: int | None = None) -> list[RankedTool]:
    """Rank ``tools`` for ``text`` (builds an index each call: for one-off questions)."""
    return ToolIndex.of_tools(tools).rank(text, limit)
