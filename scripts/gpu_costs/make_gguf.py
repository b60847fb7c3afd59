"""A GGUF with a skeleton's metadata and tensor list (skeleton.py), every weight zero: a pass through it
costs what one through the model does, for timing alone (scripts/gpu_costs/run.sh).

    python3 make_gguf.py SKELETON.json OUT.gguf PATH_TO_LLAMA_CPP/gguf-py
"""
import json, sys
sys.path.insert(0, sys.argv[3])
import numpy as np
from gguf import GGUFWriter, GGUFValueType, GGMLQuantizationType
sk = json.load(open(sys.argv[1]))
w = GGUFWriter(sys.argv[2], sk["arch"])
for f in sk["fields"]:
    sub = GGUFValueType(f["sub"]) if f["sub"] is not None else None
    w.add_key_value(f["key"], f["value"], GGUFValueType(f["type"]), sub_type=sub)
for t in sk["tensors"]:
    w.add_tensor_info(t["name"], t["shape"], np.dtype(np.float32), t["nbytes"], raw_dtype=GGMLQuantizationType(t["type"]))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
for t in sk["tensors"]:
    w.write_tensor_data(np.zeros(t["nbytes"], dtype=np.uint8))
w.close()
print("wrote", sys.argv[2])
