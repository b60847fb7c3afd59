"""The metadata and tensor list of a GGUF, without its weights, as JSON: a model to send where the model
itself is too large to go (scripts/gpu_costs/run.sh).

    python scripts/gpu_costs/skeleton.py MODEL.gguf OUT.json
"""
import json, sys
import numpy as np
from gguf import GGUFReader, GGUFValueType
src, dst = sys.argv[1:3]
r = GGUFReader(src)
fields = []
for f in r.fields.values():
    if f.name.startswith("GGUF.") or f.name == "general.architecture":
        continue
    t = f.types[0]
    sub = f.types[1] if t == GGUFValueType.ARRAY else None
    v = f.contents()
    if isinstance(v, (np.generic,)):
        v = v.item()
    fields.append({"key": f.name, "type": int(t), "sub": int(sub) if sub is not None else None, "value": v})
arch = r.fields["general.architecture"].contents()
tensors = [{"name": t.name, "shape": [int(x) for x in reversed(t.shape.tolist())], "type": int(t.tensor_type), "nbytes": int(t.n_bytes)} for t in r.tensors]
json.dump({"arch": arch, "fields": fields, "tensors": tensors}, open(dst, "w"))
print(dst, arch, len(fields), len(tensors), sum(t["nbytes"] for t in tensors))
