from .degree_embedding import DegreeEmbedding
from .rule_reasoner import DegreEmbedReasoner, RuleReasoner

__all__ = ['DegreeEmbedding', 'RuleReasoner', 'DegreEmbedReasoner']
