r"""pyg_degreembed: interpretable rule learning on knowledge graphs with
PyTorch Geometric (DegreEmbed, DRUM, Neural LP)."""
from pyg_degreembed.data.convert import (align_relations, as_kg,
                                         from_edge_index, from_hetero_data,
                                         to_hetero_data)
from pyg_degreembed.data.datasets import (KGBenchmark, bundled_path,
                                          load_dataset)
from pyg_degreembed.data.features import DegreeSets, degree_sets
from pyg_degreembed.data.io import KGFormatError, load_neural_lp
from pyg_degreembed.data.kg import scores_by_node_type
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import Signals, SourceWeights, TypedGraph
from pyg_degreembed.evaluation.predict import Prediction, predict
from pyg_degreembed.evaluation.ranks import (Ranks, TrueAnswers, compute_ranks,
                                             evaluate, filtered_ranks)
from pyg_degreembed.interpret.anyburl import read_anyburl, write_anyburl
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.interpret.explain import explain
from pyg_degreembed.interpret.rules import Rule, extract_rules
from pyg_degreembed.nn import (DegreeEmbedding, DegreEmbedReasoner,
                               RuleReasoner, WeightedRGCNConv)
from pyg_degreembed.training.checkpoint import load_model
from pyg_degreembed.training.config import TrainConfig
from pyg_degreembed.training.loop import FitResult, fit, rule_loss
from pyg_degreembed.training.runtime import retain_freed_memory
from pyg_degreembed.version import __version__

__all__ = [
    'AppliedRules', 'DegreeEmbedding', 'RuleReasoner', 'DegreEmbedReasoner',
    'WeightedRGCNConv',
    'TypedGraph',
    'Signals', 'SourceWeights', 'DegreeSets', 'degree_sets', 'load_neural_lp',
    'KGFormatError', 'KGBenchmark', 'bundled_path', 'load_dataset', 'as_kg',
    'align_relations',
    'from_edge_index', 'from_hetero_data', 'to_hetero_data',
    'scores_by_node_type',
    'resolve_graph', 'TrueAnswers', 'Ranks', 'filtered_ranks',
    'compute_ranks', 'evaluate', 'explain', 'predict', 'Prediction', 'fit',
    'FitResult', 'TrainConfig', 'rule_loss', 'Rule', 'extract_rules',
    'load_model',
    'read_anyburl', 'write_anyburl', 'retain_freed_memory', '__version__'
]
