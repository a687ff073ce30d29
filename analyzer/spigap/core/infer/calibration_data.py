"""Measured on the development half of sigrok-dumps; written by tests/sigrok_dumps_eval.py --calibrate (docs/inference.md, "Calibration")."""

# (setting, basis): (answers, right, effective answers, effective right): each unit (a device's
# series of captures) counts as at most 3 answers
MEASURED: dict[tuple[str, str], tuple[int, int, float, float]] = {
    ('bus', 'bracket/edges1'): (62, 62, 10.00, 10.00),
    ('bus', 'bracket/edges2'): (17, 17, 15.00, 15.00),
    ('bus', 'bracket/static1'): (1, 1, 1.00, 1.00),
    ('bus', 'none/edges1'): (2, 1, 2.00, 1.00),
    ('bus', 'none/edges2'): (1, 1, 1.00, 1.00),
    ('bus', 'none/edges2/cont'): (4, 0, 3.00, 0.00),
    ('bus', 'once/edges1'): (27, 27, 12.00, 12.00),
    ('bus', 'once/edges2'): (12, 12, 9.00, 9.00),
    ('bus', 'once/few1'): (2, 2, 2.00, 2.00),
    ('cs', 'bracket'): (83, 83, 27.00, 27.00),
    ('cs', 'latch'): (2, 2, 2.00, 2.00),
    ('cs', 'none'): (2, 2, 2.00, 2.00),
    ('cs', 'once'): (55, 55, 19.00, 19.00),
    ('miso', 'two, alike'): (15, 7, 10.00, 6.38),
    ('miso', 'two, clear'): (14, 14, 13.00, 13.00),
    ('miso', 'two, some'): (2, 1, 2.00, 1.00),
    ('mode', 'clear'): (157, 157, 34.00, 34.00),
    ('mode', 'clear, few'): (7, 7, 6.00, 6.00),
    ('mode', 'mostly'): (3, 3, 3.00, 3.00),
    ('mode', 'no data changes'): (23, 23, 4.00, 4.00),
    ('mode', 'split'): (2, 2, 2.00, 2.00),
    ('mosi', 'two, alike'): (15, 7, 10.00, 6.38),
    ('mosi', 'two, clear'): (14, 14, 13.00, 13.00),
    ('mosi', 'two, some'): (2, 1, 2.00, 1.00),
    ('one line is miso', 'one, released'): (11, 9, 5.00, 3.00),
    ('one line is miso', 'one, repeats'): (76, 8, 16.00, 5.64),
    ('one line is miso', 'one, varies'): (10, 0, 10.00, 0.00),
}
