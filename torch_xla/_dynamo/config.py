"""Settings of torch_xla's dynamo bridge, read at each call of a compiled graph.

skip_input_data_check: promise that a compiled graph's inputs are always device data (no
pending computation behind them); an input that is pending then raises instead of being
computed inside the graph's program (except at the graph's first call, which computes
them, as torch_xla's bridge does when it extracts the graph).
"""
skip_input_data_check = False
