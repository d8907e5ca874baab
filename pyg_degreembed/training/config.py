r"""The training settings: one dataclass, validated once, written into every
checkpoint, compared when a run resumes, and giving the command line its
defaults."""
import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, List, Optional

from pyg_degreembed.data.kg import check_positive_ints

LOSSES = ('nll', 'bce')


@dataclass(frozen=True)
class TrainConfig:
    r"""How :func:`~pyg_degreembed.fit` trains (the settings a checkpoint
    records; a run resumes only with the same ones, :obj:`epochs` aside).

    Args:
        epochs (int, optional): Maximum number of epochs.
            (default: :obj:`20`)
        batch_size (int, optional): Queries per step. (default: :obj:`128`)
        lr (float, optional): Adam learning rate. (default: :obj:`1e-3`)
        edge_weight_lr (float, optional): The learning rate of the model's
            edge weight (the degree embedding of DegreEmbed); :obj:`None`
            for :obj:`lr`.  Chosen on validation, one value for all KGs
            (see :obj:`benchmarks/variants.py`). (default: :obj:`1e-4`)
        edge_weight_decay (float, optional): L2 penalty on the parameters
            of the model's edge weight (Adam's :obj:`weight_decay`, added to
            their clipped gradients): it pulls the degree embedding's
            :math:`\rho` towards the same weights for every entity, so that
            entity-specific weights must earn their place on the training
            queries of many entities.  Chosen on validation, one value for
            all KGs. (default: :obj:`0.1`)
        patience (int, optional): Epochs without a better validation MRR
            before stopping. (default: :obj:`3`)
        clip_norm (float, optional): Gradient-norm clipping; :obj:`None` for
            none. (default: :obj:`5.0`)
        loss (str, optional): :obj:`"nll"` or :obj:`"bce"`, see
            :func:`~pyg_degreembed.training.loop.rule_loss`.
            (default: :obj:`"nll"`)
        seed (int, optional): Seed of the shuffling of the training queries
            (seed the initialisation with
            :func:`torch_geometric.seed_everything` before building the
            model). (default: :obj:`0`)
    """
    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    edge_weight_lr: Optional[float] = 1e-4
    edge_weight_decay: float = 0.1
    patience: int = 3
    clip_norm: Optional[float] = 5.0
    loss: str = 'nll'
    seed: int = 0

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"'loss' must be one of {LOSSES}, got "
                             f'{self.loss!r}')
        check_positive_ints(epochs=self.epochs, batch_size=self.batch_size,
                            patience=self.patience)
        _check_rate(self.lr, 'lr', positive=True)
        if self.edge_weight_lr is not None:
            _check_rate(self.edge_weight_lr, 'edge_weight_lr')
        _check_rate(self.edge_weight_decay, 'edge_weight_decay')
        if self.clip_norm is not None and (
                not _is_number(self.clip_norm) or
                not math.isfinite(self.clip_norm) or self.clip_norm <= 0):
            raise ValueError(f"'clip_norm' must be a positive finite number "
                             f'or None, got {self.clip_norm}')
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"'seed' must be an integer, got {self.seed!r}")

    def to_dict(self) -> Dict[str, Any]:
        r"""The settings as a plain dictionary (for a checkpoint)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, settings: Dict[str, Any]) -> 'TrainConfig':
        r"""The settings a checkpoint recorded; a setting it predates takes
        the value runs were trained with before it existed
        (:data:`SETTINGS_BEFORE_THEY_EXISTED`)."""
        known = {f.name for f in fields(cls)}
        return cls(**{**SETTINGS_BEFORE_THEY_EXISTED,
                      **{k: v for k, v in settings.items() if k in known}})

    def changes(self, other: 'TrainConfig') -> List[str]:
        r"""The settings that differ from :obj:`other` (:obj:`epochs`
        aside: a run may go on for longer), as :obj:`"name old -> new"`."""
        return [f'{f.name} {getattr(other, f.name)!r} -> '
                f'{getattr(self, f.name)!r}' for f in fields(self)
                if f.name != 'epochs' and
                getattr(self, f.name) != getattr(other, f.name)]


#: What runs checkpointed before a setting existed were trained with.
SETTINGS_BEFORE_THEY_EXISTED = {'edge_weight_lr': None,
                                'edge_weight_decay': 0.}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_rate(value, name: str, positive: bool = False):
    # A learning rate of 0 trains nothing: refused (positive=True).
    if not _is_number(value) or not math.isfinite(value) or value < 0 or \
            positive and value == 0:
        raise ValueError(f"'{name}' must be a finite number "
                         f"{'> 0' if positive else '>= 0'}, got {value}")
