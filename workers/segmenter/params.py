"""Every constant of the segmenter (DESIGN §5), in one frozen object."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas import SegmentMode


class SurpriseCalibration(BaseModel):
    """Absolute surprise `A = clip((s - center) / scale, low, high)`, per embedding model.

    The paper's constants (0.20 / 0.14) are calibrated for text-embedding-3-small, whose
    cosines run higher than MiniLM's; the local model gets its own (`DEFAULT_CALIBRATIONS`).
    """

    model_config = ConfigDict(frozen=True)

    center: float
    scale: float = Field(gt=0)
    low: float = -1.0
    high: float = 2.5

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.low > self.high:
            raise ValueError(f"low {self.low} is above high {self.high}")
        return self


PAPER_CALIBRATION = SurpriseCalibration(center=0.20, scale=0.14)

# Calibrated on MiniLM (all-MiniLM-L6-v2): the LoCoMo dev split lands near the paper's 5.8
# turns per segment (see docs/bench/README.md#segmentation).
DEFAULT_CALIBRATIONS: dict[str, SurpriseCalibration] = {
    "text-embedding-3-small": PAPER_CALIBRATION,
    "all-MiniLM-L6-v2": SurpriseCalibration(center=0.40, scale=0.10),
}


class SegmenterParams(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: SegmentMode = SegmentMode.semantic
    delta: float = Field(default=0.50, ge=0, le=1, description="cut when P_cut >= delta")
    bias: float = -1.10
    # score weights (authors' code)
    w_surprise: float = 0.65
    w_robust: float = 0.45  # inside max(A, w_robust * z)
    w_cohesion: float = 0.45
    w_length: float = 0.90
    w_turns: float = 0.30
    # robust surprise
    history_size: int = Field(default=64, ge=1)
    min_history: int = Field(default=5, ge=1)
    mad_scale: float = Field(default=1.4826, gt=0)
    robust_low: float = -2.0
    robust_high: float = 4.0
    # cohesion drop
    cohesion_scale: float = Field(default=0.06, gt=0)
    cohesion_cap: float = 2.5
    # lengths
    min_tokens: int = Field(default=300, ge=1)
    target_tokens: int = Field(default=600, ge=1)
    max_tokens: int = Field(default=900, ge=1)
    max_exchanges: int = Field(default=10, ge=1)
    # An exchange larger than `max_tokens` is encoded as segments of its own, this many at
    # most: a pasted log or a runaway reply of 200,000 characters would otherwise make a
    # hundred (each an LLM call); its raw turns keep all of it, searched by their passages.
    # 16 (about 14,000 tokens) leaves every turn of both dev sets whole.
    max_fragments: int = Field(default=16, ge=1)
    # absolute surprise; None picks the calibration of the embedding model
    calibration: SurpriseCalibration | None = None
    calibrations: dict[str, SurpriseCalibration] = Field(
        default_factory=lambda: dict(DEFAULT_CALIBRATIONS)
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        """Bounds that contradict each other would silently switch a signal off."""
        if not self.min_tokens <= self.target_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens {self.min_tokens}, target_tokens {self.target_tokens} and "
                f"max_tokens {self.max_tokens} must rise in that order"
            )
        if self.robust_low > self.robust_high:
            raise ValueError(
                f"robust_low {self.robust_low} is above robust_high {self.robust_high}"
            )
        return self

    def calibration_for(self, model_name: str) -> SurpriseCalibration:
        if self.calibration is not None:
            return self.calibration
        for name, cal in self.calibrations.items():
            if model_name.endswith(name):
                return cal
        return PAPER_CALIBRATION
