r"""Rules in AnyBURL's format: hand-checked lines on a toy KG, a round trip
through a file, and AnyBURL's own lines read back."""
import json
import re

import pytest
import torch

from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.cli import main
from pyg_degreembed.data.io import KGFormatError
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.interpret.anyburl import (anyburl_lines, read_anyburl,
                                              write_anyburl)

from conftest import chain_kg


def test_lines_of_the_chain_kg_by_hand():
    # r2 = r0 then r1 for every entity x: the body r0(X,A), r1(A,Y) joins
    # the pairs (x, y) of all r2 triples (every split) with x != y (object
    # identity), and the training triples of r2 among them are correct.
    kg = chain_kg()
    rules = AppliedRules.mine(kg, 2)
    lines = anyburl_lines(rules, kg.relation_names)
    pairs = sum(int((kg[f'{s}_edge_index'][0] !=
                     kg[f'{s}_edge_index'][1]).sum())
                for s in ('train', 'valid', 'test'))
    correct = int((kg.train_edge_index[0] != kg.train_edge_index[1]).sum())
    assert (pairs, correct) == (58, 38)  # 60 and 40, less x = y
    assert f'58\t38\t{38 / 58!r}\tr2(X,Y) <= r0(X,A), r1(A,Y)' in lines
    assert sum(line.endswith('r0(X,A), r1(A,Y)') for line in lines) == 1
    for line in lines:
        predictions, correct, confidence, rule = line.split('\t')
        assert float(confidence) == int(correct) / int(predictions)
        assert rule.count('(X,') + rule.count(',X)') == 2  # head + 1 atom
    confidences = [float(line.split('\t')[2]) for line in lines]
    assert confidences == sorted(confidences, reverse=True)


def test_round_trip_through_a_file(tmp_path):
    kg = chain_kg()
    mined = AppliedRules.mine(kg, 2)
    path = str(tmp_path / 'rules.txt')
    assert write_anyburl(path, mined, kg.relation_names) == \
        len(anyburl_lines(mined, kg.relation_names))
    read = read_anyburl(path, kg.relation_names)
    # Both directions of every rule come back, with the same confidences.
    assert torch.equal(read.rule_key, mined.rule_key)
    assert torch.allclose(read.confidence, mined.confidence)
    assert read.skipped == 0
    ranks = [compute_ranks(r, kg, 'test').ranks['realistic']
             for r in (mined, read)]
    assert torch.equal(ranks[0], ranks[1])


def test_anyburl_lines_read_back(tmp_path):
    kg = chain_kg()  # relations r0, r1, r2
    path = tmp_path / 'anyburl.txt'
    path.write_text(
        '90\t45\t0.5\tr2(X,Y) <= r1(A,Y), r0(X,A)\n'  # atoms in any order
        '10\t9\t0.9\tr2(X,e5) <= r0(X,A)\n'  # a constant: skipped
        '10\t9\t0.9\tr2(X,Y) <= r0(Y,A)\n'  # acyclic: skipped
        '10\t2\t0.2\tr0(X,Y) <= r1(Y,X)\n'  # inverse atom
        '5\t5\t1.0\tr1(X,e3)\n')  # no body: skipped
    rules = read_anyburl(str(path), kg.relation_names, unseen=10.)
    assert rules.skipped == 3
    found = {(q, body.body): body.confidence for q in range(6)
             for body in rules.rules(q)}
    # r2 by r0 then r1; its heads (query 2 + 3) by inverse r1 then inverse
    # r0; r0 by inverse r1, and r0's heads (query 3) by r1.
    assert found == {(2, (0, 1)): 45 / 100, (5, (4, 3)): 45 / 100,
                     (0, (4, )): 2 / 20, (3, (1, )): 2 / 20}
    bad = tmp_path / 'bad.txt'
    bad.write_text('90\t45\t0.5\tr2(X,Y) <= r0(X,A), r1(A,Y)\n'
                   '3\t1\t0.3\tr9(X,Y) <= r0(X,Y)\n')
    with pytest.raises(KGFormatError, match=r"bad.txt:2: unknown relation "
                       "'r9'"):
        read_anyburl(str(bad), kg.relation_names)
    bad.write_text('90\t45\tr2(X,Y) <= r0(X,A), r1(A,Y)\n')
    with pytest.raises(KGFormatError, match='bad.txt:1: expected 4 '
                       'tab-separated fields'):
        read_anyburl(str(bad), kg.relation_names)
    bad.write_text('4\t5\t1.2\tr2(X,Y) <= r0(X,A), r1(A,Y)\n')
    with pytest.raises(KGFormatError, match='5 correct predictions of 4'):
        read_anyburl(str(bad), kg.relation_names)


def test_command_line_writes_and_applies_anyburl_rules(tmp_path, capsys):
    kg = chain_kg()
    folder = tmp_path / 'chain'
    folder.mkdir()
    for split in ('facts', 'train', 'valid', 'test'):
        (folder / f'{split}.txt').write_text(''.join(
            f'e{h}\tr{r}\te{t}\n' for h, r, t in
            split_triples(kg, split).t().tolist()))
    checkpoint = str(tmp_path / 'chain.pt')
    assert main(['train', '--dataset', str(folder), '--dim', '4',
                 '--epochs', '1', '--checkpoint', checkpoint,
                 '--no-progress', '--scorer', 'rules']) == 0
    capsys.readouterr()
    assert main(['rules', '--checkpoint', checkpoint, '--format',
                 'anyburl']) == 0
    lines = capsys.readouterr().out.splitlines()
    # The chain rule is there (its converses over the facts, with no
    # counter-example, come first).
    assert any(line.endswith('\tr2(X,Y) <= r0(X,A), r1(A,Y)')
               for line in lines)
    assert all(len(line.split('\t')) == 4 for line in lines)
    rules = tmp_path / 'rules.txt'
    rules.write_text('\n'.join(lines) + '\n')
    assert main(['evaluate', '--checkpoint', checkpoint, '--anyburl',
                 str(rules)]) == 0
    out = capsys.readouterr().out
    assert f'cyclic path rules of {rules} (0 other rules skipped)' in out
    assert 'filtered test metrics' in out
    # --relation and --k select; --json writes the same rules as objects.
    assert main(['rules', '--checkpoint', checkpoint, '--format', 'anyburl',
                 '--relation', 'inv_r2', '--k', '2', '--json',
                 str(tmp_path / 'r2.json')]) == 0
    selected = capsys.readouterr().out.splitlines()
    assert selected == [line for line in lines
                        if line.split('\t')[3].startswith('r2(')][:2]
    with open(tmp_path / 'r2.json') as f:
        written = json.load(f)
    assert [(w['predictions'], w['correct'], w['rule']) for w in written] \
        == [(int(a), int(b), rule) for a, b, _, rule in
            (line.split('\t') for line in selected)]


@pytest.mark.parametrize('name', ['aunt(of)', 'bro,ther', 'a <= b', ' r2'])
def test_names_the_syntax_cannot_carry_are_refused_at_export(name):
    kg = chain_kg()
    rules = AppliedRules.mine(kg, 2)
    names = list(kg.relation_names)
    names[1] = name  # r1 is in the rule r2(X,Y) <= r0(X,A), r1(A,Y)
    with pytest.raises(ValueError, match=re.escape(
            f"relation name {name!r} cannot be written in AnyBURL's rule "
            'syntax')):
        anyburl_lines(rules, names)
    # Every name the export writes reads back.
    lines = anyburl_lines(rules, kg.relation_names)
    assert len(lines) > 3


def test_long_rules_and_huge_counts_are_skipped_and_counted(tmp_path):
    kg = chain_kg()
    long_body = ', '.join(['r0(X,A)'] + [
        f'r1({a},{b})' for a, b in zip('ABCDEFGHIJKLM', 'BCDEFGHIJKLMN')] +
        ['r0(Y,N)'])
    rules = tmp_path / 'rules.txt'
    rules.write_text(
        '10\t5\t0.5\tr2(X,Y) <= r0(X,A), r1(A,Y)\n'
        f'10\t5\t0.5\tr2(X,Y) <= {long_body}\n'
        f'{2**70}\t5\t0.0\tr2(X,Y) <= r1(X,A), r0(A,Y)\n'
        '10\t1\t0.1\tr2(X,Y) <= r2(X,A), r2(A,Y)\n')
    with pytest.warns(UserWarning, match=re.escape(
            f'{rules}:2: a rule of 15 atoms, longer than 10')):
        read = read_anyburl(str(rules), kg.relation_names)
    assert read.skipped == 2 and read.rule_key.numel() == 4  # 2 rules x 2
    assert read.num_steps == 2
    # The warning counts the others (the huge count on line 3).
    with pytest.warns(UserWarning, match='with 1 more such rules'):
        read_anyburl(str(rules), kg.relation_names)


def test_rules_without_counts_are_refused():
    kg = chain_kg()
    mined = AppliedRules.mine(kg, 2)
    payload = mined.to_payload()
    del payload['support'], payload['groundings']  # an earlier checkpoint
    with pytest.raises(ValueError, match='carry no counts'):
        anyburl_lines(AppliedRules.from_payload(payload), kg.relation_names)
