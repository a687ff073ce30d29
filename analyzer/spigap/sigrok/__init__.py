"""Glue to the sigrok tools: where our protocol decoders live, what a decoder
declares (channels, options), and PulseView session setups (.pvs)."""
