"""Measured on sigrok-dumps (every .sr of <= 30 MB, named and renamed); written by tests/sigrok_dumps_eval.py --calibrate (docs/inference.md, "Calibration")."""

# (setting, basis): (answers, right, effective answers, effective right): each unit (a device's
# series of captures) counts as at most 3 answers
MEASURED: dict[tuple[str, str], tuple[int, int, float, float]] = {
    ('bus', 'bracket/edges1'): (73, 73, 20.00, 20.00),
    ('bus', 'bracket/edges2'): (33, 33, 28.00, 28.00),
    ('bus', 'bracket/few1'): (3, 1, 3.00, 1.00),
    ('bus', 'bracket/static1'): (2, 2, 2.00, 2.00),
    ('bus', 'loose/edges1'): (2, 2, 2.00, 2.00),
    ('bus', 'none/edges1'): (50, 5, 31.00, 5.00),
    ('bus', 'none/edges1/cont'): (3, 3, 3.00, 3.00),
    ('bus', 'none/edges2'): (3, 3, 3.00, 3.00),
    ('bus', 'none/edges2/cont'): (4, 0, 3.00, 0.00),
    ('bus', 'once/edges1'): (28, 28, 13.00, 13.00),
    ('bus', 'once/edges2'): (13, 13, 10.00, 10.00),
    ('bus', 'once/few1'): (2, 2, 2.00, 2.00),
    ('bus', 'once/static1'): (2, 0, 2.00, 0.00),
    ('bus', 'square/edges1'): (2, 0, 2.00, 0.00),
    ('cs', 'bracket'): (109, 109, 44.00, 44.00),
    ('cs', 'latch'): (2, 2, 2.00, 2.00),
    ('cs', 'loose'): (2, 2, 2.00, 2.00),
    ('cs', 'none'): (6, 6, 5.00, 5.00),
    ('cs', 'none, near'): (1, 0, 1.00, 0.00),
    ('cs', 'once'): (53, 53, 18.00, 18.00),
    ('cs', 'twin'): (1, 1, 1.00, 1.00),
    ('cs', 'two brackets'): (1, 0, 1.00, 0.00),
    ('miso', 'two, alike'): (16, 8, 11.00, 7.38),
    ('miso', 'two, both repeat'): (4, 3, 4.00, 3.00),
    ('miso', 'two, clear'): (1, 1, 1.00, 1.00),
    ('miso', 'two, lag'): (1, 1, 1.00, 1.00),
    ('miso', 'two, lag, words agree'): (14, 14, 13.00, 13.00),
    ('miso', 'two, lag, words disagree'): (3, 3, 3.00, 3.00),
    ('miso', 'two, length'): (7, 7, 6.00, 6.00),
    ('miso', 'two, some'): (1, 1, 1.00, 1.00),
    ('mode', 'clear'): (191, 191, 54.00, 54.00),
    ('mode', 'clear, few'): (9, 9, 8.00, 8.00),
    ('mode', 'mostly'): (5, 5, 5.00, 5.00),
    ('mode', 'no data changes'): (31, 31, 7.00, 7.00),
    ('mode', 'split'): (6, 6, 6.00, 6.00),
    ('mosi', 'two, alike'): (16, 8, 11.00, 7.38),
    ('mosi', 'two, both repeat'): (4, 3, 4.00, 3.00),
    ('mosi', 'two, clear'): (1, 1, 1.00, 1.00),
    ('mosi', 'two, lag'): (1, 1, 1.00, 1.00),
    ('mosi', 'two, lag, words agree'): (14, 14, 13.00, 13.00),
    ('mosi', 'two, lag, words disagree'): (3, 3, 3.00, 3.00),
    ('mosi', 'two, length'): (7, 7, 6.00, 6.00),
    ('mosi', 'two, some'): (1, 1, 1.00, 1.00),
    ('one line is miso', 'one, after the edge'): (72, 50, 49.00, 36.50),
    ('one line is miso', 'one, between edges'): (36, 16, 25.00, 9.00),
    ('one line is miso', 'one, few changes'): (86, 36, 18.00, 10.88),
    ('one line is miso', 'one, released'): (26, 26, 10.00, 10.00),
    ('one line is miso', 'one, with the edge'): (248, 34, 65.00, 10.75),
}

# (setting group, "unseen"): the answers whose basis the other folds never saw, in a 5-fold
# cross-validation by device: what a never-seen basis is stated at
UNSEEN: dict[tuple[str, str], tuple[int, int, float, float]] = {
    ('bus', 'unseen'): (21, 11, 20.00, 11.00),
    ('cs', 'unseen'): (5, 5, 5.00, 5.00),
    ('data', 'unseen'): (6, 6, 6.00, 6.00),
}

# setting group: (a, b) of the Beta prior of its bases' shares right (the beta-binomial
# marginal likelihood of MEASURED's effective answers; a basis is stated at its posterior mean)
PRIOR: dict[str, tuple[float, float]] = {
    'bus': (0.2512, 0.1),
    'cs': (10.0, 0.1),
    'data': (10.0, 0.1),
    'mode': (10.0, 0.1),
    'one line is miso': (1.0, 0.7079),
}

# CPOL: (settled answers, with CPHA 1, effective answers, effective with CPHA 1) of the SPI captures
# whose CPHA the signals settle: the base rate a CPHA without evidence is stated at
CPHA: dict[int, tuple[int, int, float, float]] = {
    0: (149, 48, 19.00, 2.67),
    1: (56, 32, 6.00, 4.50),
}
