r"""pyg_degreembed: interpretable rule learning on knowledge graphs with
PyTorch Geometric (DegreEmbed, DRUM, Neural LP)."""
from .anyburl import read_anyburl, write_anyburl
from .applied_rules import AppliedRules
from .checkpoint import load_model
from .convert import (align_relations, as_kg, from_edge_index,
                      from_hetero_data, to_hetero_data)
from .datasets import KGBenchmark, bundled_path, load_dataset
from .evaluation import (Ranks, TrueAnswers, compute_ranks, evaluate,
                         filtered_ranks)
from .explain import explain
from .features import DegreeSets, degree_sets
from .io import KGFormatError, load_neural_lp
from .nn import DegreeEmbedding, DegreEmbedReasoner, RuleReasoner
from .predict import Prediction, predict
from .resolve import resolve_graph
from .rules import Rule, extract_rules
from .runtime import retain_freed_memory
from .training import FitResult, fit, rule_loss
from .typed_graph import Signals, SourceWeights, TypedGraph
from .version import __version__

__all__ = [
    'AppliedRules', 'DegreeEmbedding', 'RuleReasoner', 'DegreEmbedReasoner',
    'TypedGraph',
    'Signals', 'SourceWeights', 'DegreeSets', 'degree_sets', 'load_neural_lp',
    'KGFormatError', 'KGBenchmark', 'bundled_path', 'load_dataset', 'as_kg',
    'align_relations',
    'from_edge_index', 'from_hetero_data', 'to_hetero_data',
    'resolve_graph', 'TrueAnswers', 'Ranks', 'filtered_ranks',
    'compute_ranks', 'evaluate', 'explain', 'predict', 'Prediction', 'fit',
    'FitResult', 'rule_loss', 'Rule', 'extract_rules', 'load_model',
    'read_anyburl', 'write_anyburl', 'retain_freed_memory', '__version__'
]
