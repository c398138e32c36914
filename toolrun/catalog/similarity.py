"""Deterministic text similarity between tools: TF-IDF vectors and cosine, pure Python.

Used by the near-duplicate lint rule. Documents are a tool's name plus its description.
Terms: lower-cased runs of letters (snake_case and camelCase names are split into words),
English stopwords dropped, and CJK text as single characters plus character bigrams (CJK
has no spaces, and bigrams carry most of the meaning of Chinese words).

Speed: vectors are sparse dicts, and pairs are found through an inverted index, so only
documents that share at least one term are ever compared. The result is exactly the same
as comparing all pairs (``all_pairs_similar`` is kept as the baseline for benchmarks).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

# Why a stopword list: in a small catalog IDF cannot tell "the" from "inventory" reliably.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does for from has have if in into is it
    its may might must no not of on or our should so such than that the their them then there
    these they this those to was were when which while who will with would you your""".split()
)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_LETTER_RUN = re.compile(r"[^\W\d_]+")


def is_cjk(char: str) -> bool:
    """True for Chinese, Japanese and Korean characters (scored per character, not per word)."""
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= code <= 0x4DBF  # extension A
        or 0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
    )


def tokenize(text: str) -> list[str]:
    """The terms of ``text``, in order (CJK runs give unigrams then bigrams)."""
    terms: list[str] = []
    for run in _LETTER_RUN.findall(_CAMEL_BOUNDARY.sub(" ", text)):
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
                terms.extend(a + b for a, b in zip(cjk, cjk[1:]))
                cjk = []
            if char != " ":
                word.append(char)
        if word:
            terms.append("".join(word).lower())
    return [term for term in terms if term not in STOPWORDS and (len(term) > 1 or is_cjk(term))]


def tfidf_vectors(documents: list[str]) -> list[dict[str, float]]:
    """L2-normalised TF-IDF vectors (sublinear tf, smoothed idf), one per document."""
    counts = [Counter(tokenize(document)) for document in documents]
    document_frequency: Counter[str] = Counter()
    for count in counts:
        document_frequency.update(count.keys())
    total = len(documents)
    idf = {term: math.log((1 + total) / (1 + df)) + 1.0 for term, df in document_frequency.items()}
    vectors: list[dict[str, float]] = []
    for count in counts:
        vector = {term: (1.0 + math.log(n)) * idf[term] for term, n in count.items()}
        norm = math.sqrt(sum(weight * weight for weight in vector.values()))
        vectors.append({term: weight / norm for term, weight in vector.items()} if norm else {})
    return vectors


@dataclass(frozen=True)
class SimilarPair:
    """Two documents (by index, ``first < second``) and their cosine similarity."""

    first: int
    second: int
    score: float


def similar_pairs(documents: list[str], threshold: float) -> list[SimilarPair]:
    """Every pair of documents with cosine >= ``threshold``, ordered by (first, second).

    Only pairs sharing a term are scored (inverted index); the order of the output does not
    depend on dict or set iteration order, so the result is the same on every run.
    """
    vectors = tfidf_vectors(documents)
    # Each document is scored against the earlier ones already in the index, then added.
    postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
    pairs: list[SimilarPair] = []
    for index, vector in enumerate(vectors):
        dot: dict[int, float] = defaultdict(float)
        for term, weight in vector.items():
            for other, other_weight in postings[term]:
                dot[other] += weight * other_weight
            postings[term].append((index, weight))
        for other, total in dot.items():
            score = round(total, 6)  # rounding: float sums must not flip a borderline pair
            if score >= threshold:
                pairs.append(SimilarPair(other, index, score))
    pairs.sort(key=lambda pair: (pair.first, pair.second))
    return pairs


def all_pairs_similar(documents: list[str], threshold: float) -> list[SimilarPair]:
    """The naive baseline: score every pair. Same result as ``similar_pairs``, O(n²)."""
    vectors = tfidf_vectors(documents)
    pairs: list[SimilarPair] = []
    for index, vector in enumerate(vectors):
        for other in range(index + 1, len(vectors)):
            other_vector = vectors[other]
            score = round(sum(w * other_vector.get(t, 0.0) for t, w in vector.items()), 6)
            if score >= threshold:
                pairs.append(SimilarPair(index, other, score))
    return pairs
