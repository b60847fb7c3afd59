"""`tandem bench`: does speculation pay for this pair, on this machine, for this text?"""
