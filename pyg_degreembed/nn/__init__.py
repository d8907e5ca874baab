from pyg_degreembed.nn.degree_embedding import DegreeEmbedding
from pyg_degreembed.nn.rule_reasoner import DegreEmbedReasoner, RuleReasoner
from pyg_degreembed.nn.weighted_rgcn import WeightedRGCNConv

__all__ = ['DegreeEmbedding', 'RuleReasoner', 'DegreEmbedReasoner',
           'WeightedRGCNConv']
