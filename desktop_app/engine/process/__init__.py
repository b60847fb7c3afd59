"""The engine in its own process: the window's one worker talks to it through `client.EngineProcess`;
`host.main` runs in the child and owns the models, the KV caches and the decoding loop;
`protocol` holds the messages between them. A native fault in llama.cpp (a CPU fault, a GPU driver
error, an assertion, the OOM killer) then ends the child, never the window.

Nothing here imports llama.cpp in the parent process.
"""
