"""Backends that run the models elsewhere: a running llama-server (server.py, rounds rebuilt from its
streamed timings by rounds.py) and llama.cpp RPC servers (rpc.py). No Qt here."""
