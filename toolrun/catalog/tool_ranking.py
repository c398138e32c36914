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
    """An inverted index of a catalog for BM25F ranking; build once, rank many texts."""

    def __init__(self, tools: Iterable[ToolText]) -> None:
        self.names: list[str] = []
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        documents = [(tool.name, _field_terms(tool)) for tool in tools]
        average = {name: sum(len(fields[name]) for _, fields in documents) / max(len(documents), 1) or 1.0
                   for name in FIELD_WEIGHTS}
        self._documents: list[dict[str, float]] = []
        self._name_terms: list[frozenset[str]] = []
        for index, (name, fields) in enumerate(documents):
            self.names.append(name)
            weights = _weighted_frequencies(fields, average)
            self._documents.append(weights)
            self._name_terms.append(frozenset(fields["name"]))
            for term, weight in weights.items():
                self._postings[term].append((index, weight))
        count = len(documents)
        self._idf = {term: math.log(1 + (count - len(postings) + 0.5) / (len(postings) + 0.5))
                     for term, postings in self._postings.items()}
        self._name_mass = [sum(self._idf[term] for term in name_terms) or 1.0 for name_terms in self._name_terms]

    @classmethod
    def of_tools(cls, tools: Iterable[Tool]) -> ToolIndex:
        return cls(ToolText.of(tool) for tool in tools)

    def rank(self, text: str, limit: int | None = None) -> list[RankedTool]:
        """Tools by relevance to ``text``, best first; ties and tools sharing no term keep catalog order."""
        scores = self.scores(text)
        order = sorted(range(len(self.names)), key=lambda index: -scores[index])
        ranked = [RankedTool(self.names[index], round(scores[index], 4)) for index in order]
        return ranked if limit is None else ranked[:limit]

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
        for term, query_weight in query.items():
            idf = self._idf.get(term)
            if idf is None:
                continue
            for index, weight in self._postings[term]:
                scores[index] += query_weight * idf * weight / (SATURATION + weight)
        if NAME_COVERAGE_WEIGHT:
            for index, score in enumerate(scores):
                if score > 0:
                    covered = sum(self._idf[term] for term in self._name_terms[index] if term in query)
                    scores[index] += NAME_COVERAGE_WEIGHT * covered / self._name_mass[index]
        return scores

    def _feedback_terms(self, query: dict[str, float], scores: list[float]) -> dict[str, float]:
        """Pseudo-relevance feedback: the telling terms of the best few tools, at a fraction of a word's weight."""
        best = heapq.nlargest(FEEDBACK_TOOLS, (index for index in range(len(scores)) if scores[index] > 0),
                              key=scores.__getitem__)
        pooled: dict[str, float] = defaultdict(float)
        for index in best:
            for term, weight in self._documents[index].items():
                if term not in query:
                    pooled[term] += self._idf[term] * weight / (SATURATION + weight)
        top = heapq.nlargest(FEEDBACK_TERMS, pooled.items(), key=lambda item: item[1])
        if not top:
            return {}
        strongest = top[0][1]
        return {term: FEEDBACK_WEIGHT * weight / strongest for term, weight in top}


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
