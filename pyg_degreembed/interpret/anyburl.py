r"""Rules in AnyBURL's format, the common currency of symbolic rule
application (AnyBURL, SAFRAN and PyClause read it).

A line is tab-separated: the rule's body groundings (its predictions), its
correct predictions, its confidence (correct / predictions) and the rule,

.. code-block:: text

    1024	870	0.849609375	aunt(X,Y) <= aunt(X,A), nephew(B,A), father(Y,B)

with :obj:`X` and :obj:`Y` the head's variables and :obj:`A`, :obj:`B`,
... the body's, an inverse edge written as the relation with its arguments
swapped.  The counts written are those behind this library's confidences
(:func:`~pyg_degreembed.interpret.applied_rules.rule_counts`): the correct
predictions are the *training* queries a rule answers, the facts of a KG
that has a :obj:`facts` split being its evidence only, so on such KGs the
confidences are lower than AnyBURL's by about the training share of the
observed triples, for every rule alike (the order of the rules is what
ranking uses).  A path rule of :class:`~pyg_degreembed.AppliedRules`
answers one query direction; AnyBURL's rule answers both, so a rule of an
inverse query :math:`r^{-1}(X, Y) \Leftarrow k_1(X, A), \ldots` is
written as the rule of
:math:`r` whose body is the reversed path (the same rule: the two
directions of one rule have the same counts, and where both are mined the
forward one is written).

:func:`read_anyburl` reads such a file back as
:class:`~pyg_degreembed.AppliedRules` (both directions of each rule, the
confidence :math:`\mathrm{correct} / (\mathrm{predictions} + u)` as for
mined rules), so that AnyBURL's rules and this library's rank under one
evaluation protocol.  Only cyclic path rules are read (every variable but
:obj:`X` and :obj:`Y` in two atoms, a chain from :obj:`X` to :obj:`Y`, no
constants); the others (AnyBURL's rules with constants and its acyclic
rules) are counted and skipped, and so are rules longer than this library
holds (:data:`~pyg_degreembed.data.kg.MAX_RULE_LENGTH` edges, or fewer
where the rule ids of many relations would pass 64 bits) and counts beyond
64 bits, with a warning naming the first one's line.
"""
import re
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch.nn import Module

from pyg_degreembed.data.io import KGFormatError, read_lines
from pyg_degreembed.data.kg import MAX_RULE_LENGTH
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.interpret.paths import pattern_of
from pyg_degreembed.interpret.rules import format_atom
from pyg_degreembed.training.files import atomic_write

#: An atom: relation(first,second).
_ATOM = re.compile(r'\s*([^(),]+?)\(\s*([^(),]+?)\s*,\s*([^(),]+?)\s*\)\s*')
#: The body variables, in order.
VARIABLES = 'ABCDEFGHIJKLMNOPQRSTUVW'


def _reverse(pattern: Sequence[int], num_relations: int) -> Tuple[int, ...]:
    # The same path read from its other end: reversed, each edge inverted.
    R = num_relations
    return tuple((k + R) % (2 * R) for k in reversed(pattern))


#: What a relation name in AnyBURL's rule syntax cannot hold.
_UNWRITABLE = re.compile(r'[(),\t\n\r]|<=|^\s|\s$')


def anyburl_lines(rules: AppliedRules, relation_names: Sequence[str],
                  relation: Optional[int] = None,
                  k: Optional[int] = None,
                  entity_names: Optional[Sequence[str]] = None
                  ) -> List[str]:
    r"""The path rules of :obj:`rules` as AnyBURL rule lines (see the
    module's description), best confidence first: all, or those of head
    relation :obj:`relation` (an inverse query :math:`r^{-1}` gives the
    rules of :math:`r`, which answer both directions), at most :obj:`k`
    per head relation.  The rules must carry their counts
    (:meth:`AppliedRules.mine` keeps them).  A relation name that the
    syntax cannot carry (parentheses, commas, tabs, :obj:`<=`, leading or
    trailing spaces: the line would not read back) is refused with a
    :class:`ValueError` naming it.  With :obj:`entity_names`, the constant
    rules are written too, in AnyBURL's syntax: :obj:`r(X,c) <= b(X,d)`,
    :obj:`r(X,c) <= b(X,A)` (the inverse query's :obj:`r(c,Y) <= ...`);
    those with an empty body, which AnyBURL does not learn, are not."""
    if rules.support is None or rules.groundings is None:
        raise ValueError('These applied rules carry no counts (rules of a '
                         'checkpoint of an earlier version): mine them again '
                         '(AppliedRules.mine) to write them in AnyBURL\'s '
                         'format')
    R = rules.num_relations
    if len(relation_names) != R:
        raise ValueError(f'{len(relation_names)} relation names for rules of '
                         f'{R} relations')
    P = rules._num_patterns
    found: Dict[Tuple[int, Tuple[int, ...]], Tuple[int, int]] = {}
    for key, support, groundings in zip(rules.rule_key.tolist(),
                                        rules.support.tolist(),
                                        rules.groundings.tolist()):
        q, body = divmod(key, P)
        body = pattern_of(body, 2 * R)
        if q >= R:  # the rule of the inverse query, read forward, unless
            # the forward rule was mined too
            found.setdefault((q - R, _reverse(body, R)),
                             (groundings, support))
        else:
            found[q, body] = (groundings, support)
    if relation is not None:
        found = {key: value for key, value in found.items()
                 if key[0] == relation % R}
    _check_writable(relation_names[r] for r in sorted(
        {k % R for q, body in found for k in (q, ) + body}))
    lines = [] if entity_names is None else \
        _constant_lines(rules, relation_names, entity_names, relation)
    for (q, body), (groundings, support) in found.items():
        variables = ['X'] + list(VARIABLES[:len(body) - 1]) + ['Y']
        atoms = [format_atom(k, variables[i], variables[i + 1],
                             relation_names) for i, k in enumerate(body)]
        confidence = support / groundings if groundings else 0.
        lines.append((confidence, support,
                      f'{groundings}\t{support}\t{confidence!r}\t'
                      f'{relation_names[q]}(X,Y) <= {", ".join(atoms)}'))
    lines.sort(key=lambda line: (-line[0], -line[1], line[2]))
    if k is not None:
        per_head: Dict[str, int] = {}
        kept = []
        for line in lines:
            head = line[2].split('\t')[3].split('(', 1)[0]
            per_head[head] = per_head.get(head, 0) + 1
            if per_head[head] <= k:
                kept.append(line)
        lines = kept
    return [line for _, _, line in lines]


def _check_writable(names, kind: str = 'relation'):
    # Refuses a name AnyBURL's syntax cannot carry (the line would not read
    # back).
    bad = next((n for n in names if _UNWRITABLE.search(n)), None)
    if bad is not None:
        raise ValueError(f"{kind} name {bad!r} cannot be written in "
                         "AnyBURL's rule syntax (no parentheses, commas, "
                         "tabs, '<=' or spaces at either end): the lines "
                         f'would not read back; rename the {kind}')


def _constant_lines(rules: AppliedRules, relation_names: Sequence[str],
                    entity_names: Sequence[str],
                    relation: Optional[int]) -> List[Tuple[float, int, str]]:
    # The constant rules with a body as (confidence, support, line).
    constants = rules.constant_rules
    if constants is None:
        return []
    R = len(relation_names)
    out = []
    for q, b, d, c, support, groundings in zip(*(
            getattr(constants, name).tolist() for name in (
                'relation', 'body_type', 'body_node', 'answer', 'support',
                'groundings'))):
        if b == 2 * R or relation is not None and q % R != relation % R:
            continue
        _check_writable([relation_names[q % R], relation_names[b % R]])
        _check_writable([entity_names[e] for e in (c, d) if e >= 0],
                        'entity')
        variable = 'X' if q < R else 'Y'
        head = (variable, entity_names[c])[::1 if q < R else -1]
        other = 'A' if d < 0 else entity_names[d]
        body = (variable, other)[::1 if b < R else -1]
        confidence = support / groundings if groundings else 0.
        out.append((confidence, support,
                    f'{groundings}\t{support}\t{confidence!r}\t'
                    f'{relation_names[q % R]}({",".join(head)}) <= '
                    f'{relation_names[b % R]}({",".join(body)})'))
    return out


def write_anyburl(path: str, rules: AppliedRules,
                  relation_names: Sequence[str]) -> int:
    r"""Writes :func:`anyburl_lines` to :obj:`path` (atomically); returns
    how many rules."""
    lines = anyburl_lines(rules, relation_names)
    atomic_write(path, lambda f: f.write(''.join(
        line + '\n' for line in lines)), binary=False)
    return len(lines)


def _path_of(atoms: List[Tuple[str, str, str]], names: Dict[str, int],
             R: int) -> Optional[Tuple[int, ...]]:
    # The edge types of a chain of atoms from X to Y, or None where the
    # body is not one (constants, branches, a variable seen once).
    left, at, path = list(atoms), 'X', []
    while left:
        step = [i for i, (_, a, b) in enumerate(left) if at in (a, b)]
        if len(step) != 1:
            return None
        name, a, b = left.pop(step[0])
        if name not in names:
            raise KeyError(name)
        forward = a == at
        path.append(names[name] if forward else names[name] + R)
        at = b if forward else a
        if at == 'X' or (at == 'Y') != (not left) or \
                not (at == 'Y' or len(at) == 1 and at in VARIABLES):
            return None
    return tuple(path) if at == 'Y' else None


def _atoms(body: str) -> Optional[List[Tuple[str, str, str]]]:
    # The atoms of a rule body "r(A,B), s(B,C)" (None where it is not one).
    atoms: List[Tuple[str, str, str]] = []
    at = 0
    while at < len(body):
        match = _ATOM.match(body, at)
        if match is None:
            return None
        atoms.append((match.group(1), match.group(2), match.group(3)))
        at = match.end()
        if at < len(body):
            if body[at] != ',':
                return None
            at += 1
    return atoms


def read_anyburl(path: str, relation_names: Sequence[str],
                 unseen: float = 200., num_keys: int = 3,
                 tie_break: Optional[Module] = None) -> AppliedRules:
    r"""Reads an AnyBURL rule file as :class:`AppliedRules` over the
    relations :obj:`relation_names` (a KG's, in its order): each cyclic
    path rule :math:`r(X, Y) \Leftarrow \ldots` with :math:`n` predictions
    and :math:`c` correct ones answers :math:`(x, r, ?)` by its body and
    :math:`(?, r, y)` by the reversed body, with confidence :math:`c / (n +
    u)`.  Other rules are skipped (:obj:`skipped` on the result counts
    them).  A line that is not a rule line, or a relation the names do not
    hold, is a :class:`~pyg_degreembed.data.io.KGFormatError` naming the file
    and line.

    Args:
        path (str): The rule file.
        relation_names (Sequence[str]): The KG's relation names.
        unseen (float, optional): The :math:`u` of the confidence.
            (default: :obj:`200.0`, as :meth:`AppliedRules.mine`)
        num_keys (int, optional): See :class:`AppliedRules`.
        tie_break (torch.nn.Module, optional): See :class:`AppliedRules`.
    """
    R = len(relation_names)
    names = {name: i for i, name in enumerate(relation_names)}
    rules: Dict[Tuple[int, Tuple[int, ...]], Tuple[int, int]] = {}
    skipped = 0
    # Rules this library cannot hold: longer than its rule length, or
    # beyond 64-bit rule ids or counts (each skipped, counted, the first
    # named with its line).
    longest = _longest_rule(R)
    unreadable: List[Tuple[int, str]] = []
    for i, line in read_lines(path):
        fields = line.split('\t')
        if len(fields) != 4:
            raise KGFormatError(path, i, f'expected 4 tab-separated fields '
                                '(predictions, correct, confidence, rule), '
                                f'got {len(fields)}')
        try:
            predictions, correct = int(fields[0]), int(fields[1])
            float(fields[2])
        except ValueError:
            raise KGFormatError(path, i, 'the first three fields must be '
                                'two counts and a confidence') from None
        if not 0 <= correct <= predictions:
            raise KGFormatError(path, i, f'{correct} correct predictions of '
                                f'{predictions}')
        head_atom, arrow, body = fields[3].partition(' <= ')
        head = _ATOM.fullmatch(head_atom)
        atoms = _atoms(body)
        if head is None or atoms is None:
            raise KGFormatError(path, i, f'cannot read the rule '
                                f'{fields[3]!r}')
        try:
            q = names[head.group(1)]  # KeyError: an unknown relation
            body_path = _path_of(atoms, names, R) if arrow and atoms and \
                head.group(2, 3) == ('X', 'Y') else None
        except KeyError as e:
            raise KGFormatError(path, i, f'unknown relation {e.args[0]!r} '
                                "(not one of the KG's)") from None
        if body_path is None:
            skipped += 1
            continue
        if len(body_path) > longest or predictions >= 2**63:
            unreadable.append((i, f'{len(body_path)} atoms, longer than '
                               f'{longest} (the longest rule this library '
                               f'holds for {R} relations)'
                               if len(body_path) > longest else
                               f'{predictions} predictions, beyond 64-bit '
                               'counts'))
            continue
        for key in ((q, body_path), (q + R, _reverse(body_path, R))):
            rules.setdefault(key, (predictions, correct))
    if unreadable:
        first, why = unreadable[0]
        warnings.warn(f'{path}:{first}: a rule of {why}: skipped, with '
                      f'{len(unreadable) - 1} more such rules')
    skipped += len(unreadable)
    if not rules:
        raise KGFormatError(path, 0, f'no cyclic path rule to read '
                            f'({skipped} other rules)')
    num_steps = max(len(body) for _, body in rules)
    base = 2 * R + 1
    relation = torch.tensor([q for q, _ in rules])
    pattern = torch.tensor([sum((k + 1) * base**(len(body) - 1 - j)
                                for j, k in enumerate(body))
                            for _, body in rules])
    groundings = torch.tensor([n for n, _ in rules.values()])
    support = torch.tensor([c for _, c in rules.values()])
    out = AppliedRules(R, num_steps, relation, pattern,
                       support.double() / (groundings + unseen), num_keys,
                       tie_break, support=support, groundings=groundings)
    out.skipped = skipped
    return out


def _longest_rule(num_relations: int) -> int:
    # The most atoms of a rule whose id (query relation, pattern) fits in
    # 64 bits, at most the library's rule length.
    K, longest = 2 * num_relations, 0
    while longest < MAX_RULE_LENGTH and \
            2 * K * (K + 1)**(longest + 1) < 2**63:
        longest += 1
    return longest


__all__ = ['anyburl_lines', 'write_anyburl', 'read_anyburl']
