"""The resolvelib provider: matches catalogue candidates against requirements. No I/O."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from packaging.utils import canonicalize_name
from resolvelib import AbstractProvider

from .candidates import Candidate, Catalogue, Req

__all__ = ["Provider"]

#: Resolve extensions before the torch family: their wheels pin torch exactly, so choosing
#: them first lets "wheels over source builds" win over "the newest torch".
_ORDER = {"torch": 2, "torchvision": 1, "torchaudio": 1}


class Provider(AbstractProvider[Req, Candidate, str]):
    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue

    def identify(self, requirement_or_candidate: Req | Candidate) -> str:
        return canonicalize_name(requirement_or_candidate.name)

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, Candidate],
        candidates: Mapping[str, Iterator[Candidate]],
        information: Mapping[str, Iterator[Any]],
        backtrack_causes: Sequence[Any],
    ) -> tuple[int, int, str]:
        # A package with a single possible candidate (an installed torch kept as it is) first.
        single = len(self.catalogue.candidates(identifier)) <= 1
        return (0 if single else 1, _ORDER.get(identifier, 0), identifier)

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Req]],
        incompatibilities: Mapping[str, Iterator[Candidate]],
    ) -> Iterable[Candidate]:
        wanted = list(requirements[identifier])
        bad = {id(candidate) for candidate in incompatibilities[identifier]}
        return [
            candidate
            for candidate in self.catalogue.candidates(identifier)
            if id(candidate) not in bad
            and all(Catalogue.satisfies(req, candidate) for req in wanted)
        ]

    def is_satisfied_by(self, requirement: Req, candidate: Candidate) -> bool:
        return Catalogue.satisfies(requirement, candidate)

    def get_dependencies(self, candidate: Candidate) -> Iterable[Req]:
        return self.catalogue.dependencies(candidate)
