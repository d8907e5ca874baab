from pyg_degreembed.nn.degree_embedding import DegreeEmbedding
from pyg_degreembed.nn.rule_reasoner import DegreEmbedReasoner, RuleReasoner

__all__ = ['DegreeEmbedding', 'RuleReasoner', 'DegreEmbedReasoner']
