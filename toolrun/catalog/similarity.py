"""Deterministic text similarity between tools: TF-IDF vectors and cosine, pure Python.

Used by the near-duplicate lint rule. Documents are a tool's name plus its description.
Terms: lower-cased runs of letters (snake_case and camelCase names are split into words),
English stopwords dropped, and CJK text as single characters plus character bigrams (CJK
has no spaces, and bigrams carry most of the meaning of Chinese words).

Speed: vectors are sparse dicts, and candidate pairs come from an inverted index with
prefix filtering, so only documents that share a term that could matter are compared. The
result is exactly the same as comparing all pairs (``all_pairs_similar``, kept as the
baseline for tests and benchmarks).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from toolrun.catalog.cjk import has_cjk, is_cjk

# Why a stopword list: in a small catalog IDF cannot tell "the" from "inventory" reliably.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does for from has have if in into is it
    its may might must no not of on or our should so such than that the their them then there
    these they this those to was were when which while who will with would you your""".split()
)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LETTER_RUN = re.compile(r"[^\W\d_]+")


def tokenize(text: str) -> list[str]:
    """The terms of ``text``, in order (CJK runs give unigrams then bigrams)."""
    terms: list[str] = []
    for run in _LETTER_RUN.findall(_CAMEL_BOUNDARY.sub(" ", text)):
        if not has_cjk(run):  # the common case: one plain word
            terms.append(run.lower())
            continue
        word: list[str] = []
        cjk: list[str] = []
        for char in run + " ":
            if char != " " and is_cjk(char):
                if word:
                    terms.append("".join(word).lower())
                    word = []
                cjk.append(char)
                continue
            if cjk:
                terms.extend(cjk)
                terms.extend(a + b for a, b in pairwise(cjk))
                cjk = []
            if char != " ":
                word.append(char)
        if word:
            terms.append("".join(word).lower())
    return [term for term in terms if term not in STOPWORDS and (len(term) > 1 or is_cjk(term))]


def tfidf_vectors(documents: list[str]) -> list[dict[str, float]]:
    """L2-normalised TF-IDF vectors (sublinear tf, smoothed idf), one per document."""
    counts = [Counter(tokenize(document)) for document in documents]
    idf = _idf(counts)
    return [_vector(count, idf) for count in counts]


def _idf(counts: list[Counter[str]]) -> dict[str, float]:
    document_frequency: Counter[str] = Counter()
    for count in counts:
        document_frequency.update(count.keys())
    total = len(counts)
    return {term: math.log((1 + total) / (1 + df)) + 1.0 for term, df in document_frequency.items()}


def _vector(count: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    vector = {term: (1.0 + math.log(n)) * idf[term] for term, n in count.items()}
    norm = math.sqrt(sum(weight * weight for weight in vector.values()))
    return {term: weight / norm for term, weight in vector.items()} if norm else {}


@dataclass(frozen=True)
class SimilarPair:
    """Two documents (by index, ``first < second``) and their cosine similarity."""

    first: int
    second: int
    score: float


def _dot(first: dict[str, float], second: dict[str, float]) -> float:
    # Always summed over the lower-index vector, in its order: the same floats as the baseline.
    return sum(weight * second.get(term, 0.0) for term, weight in first.items())


@dataclass(frozen=True)
class SimilarGroups:
    """Documents with the same terms (and label) grouped, and the groups that are similar.

    ``members[g]`` lists group ``g``'s documents in order; ``self_score[g]`` is the score of
    two documents of group ``g`` (their vectors are the same); ``pairs`` holds the groups
    whose score is at or above the threshold, by group index.
    """

    members: list[list[int]]
    self_score: list[float]
    pairs: list[SimilarPair]


def similar_groups(documents: Sequence[str], threshold: float,
                   labels: Sequence[Hashable] | None = None) -> SimilarGroups:
    """Like ``similar_pairs``, for a catalog of look-alikes: same-term documents are scored once.

    Thousands of tools generated from one template differ only in numbers, which carry no
    terms: as groups, they cost one vector and one score instead of n² dot products. The
    weights are those of ``tfidf_vectors`` over all documents (repeats count in the IDF).
    Documents with different ``labels`` are never put in one group.
    """
    counts = [Counter(tokenize(document)) for document in documents]
    idf = _idf(counts)
    group_by_key: dict[tuple[Hashable, frozenset[tuple[str, int]]], int] = {}
    members: list[list[int]] = []
    representatives: list[Counter[str]] = []
    for index, count in enumerate(counts):
        key = (labels[index] if labels is not None else None, frozenset(count.items()))
        group = group_by_key.setdefault(key, len(members))
        if group == len(members):
            members.append([])
            representatives.append(count)
        members[group].append(index)
    vectors = [_vector(count, idf) for count in representatives]
    self_score = [round(_dot(vector, vector), 6) for vector in vectors]
    return SimilarGroups(members, self_score, _similar_vector_pairs(vectors, threshold))


def similar_pairs(documents: list[str], threshold: float) -> list[SimilarPair]:
    """Every pair of documents with cosine >= ``threshold``, ordered by (first, second).

    All-pairs similarity search with prefix filtering (Bayardo et al., WWW 2007): each
    document's most common terms are left out of the inverted index as long as, even at
    their highest weight anywhere, they could not reach ``threshold`` together. A pair at or
    above the threshold therefore always shares an indexed term, so it is found; candidates
    are then scored exactly. Same result as ``all_pairs_similar``, without comparing every
    pair on the words every description uses.
    """
    if threshold <= 0:
        return all_pairs_similar(documents, threshold)
    return _similar_vector_pairs(tfidf_vectors(documents), threshold)


def _similar_vector_pairs(vectors: list[dict[str, float]], threshold: float) -> list[SimilarPair]:
    """``similar_pairs`` on vectors: every pair at or above ``threshold`` (> 0), by prefix filtering."""
    if threshold <= 0:
        return [pair for first, vector in enumerate(vectors) for second in range(first + 1, len(vectors))
                if (pair := SimilarPair(first, second, round(_dot(vector, vectors[second]), 6))).score >= threshold]
    document_frequency: Counter[str] = Counter(term for vector in vectors for term in vector)
    max_weight: dict[str, float] = {}
    for vector in vectors:
        for term, weight in vector.items():
            max_weight[term] = max(weight, max_weight.get(term, 0.0))
    index_from = threshold - 1e-6  # margin: scores are rounded to 6 digits before comparing
    postings: dict[str, list[int]] = defaultdict(list)
    pairs: list[SimilarPair] = []
    for index, vector in enumerate(vectors):
        candidates: set[int] = set()
        for term in vector:
            candidates.update(postings.get(term, ()))
        for other in candidates:
            score = round(_dot(vectors[other], vector), 6)
            if score >= threshold:
                pairs.append(SimilarPair(other, index, score))
        bound = 0.0
        for term in sorted(vector, key=lambda t: (-document_frequency[t], t)):
            bound += vector[term] * max_weight[term]
            if bound >= index_from:
                postings[term].append(index)
    pairs.sort(key=lambda pair: (pair.first, pair.second))
    return pairs


def all_pairs_similar(documents: list[str], threshold: float) -> list[SimilarPair]:
    """The naive baseline: score every pair. Same result as ``similar_pairs``, O(n²)."""
    vectors = tfidf_vectors(documents)
    pairs: list[SimilarPair] = []
    for index, vector in enumerate(vectors):
        for other in range(index + 1, len(vectors)):
            other_vector = vectors[other]
            score = round(_dot(vector, other_vector), 6)
            if score >= threshold:
                pairs.append(SimilarPair(index, other, score))
    return pairs
