#!/usr/bin/python3
"""Writes models/timm_registered.inc: every ViT-family name timm registers (@register_model in
vision_transformer.py, eva.py, deit.py, beit.py and cait.py) with its constructor's keyword arguments, as attnscope's
ViT reads them. A new timm release is a rerun of this script, not hand work.

Usage: scripts/timm_registry.py TIMM_SOURCE_DIR [OUT]   (TIMM_SOURCE_DIR holds timm/models/*.py)

The sources are read with Python's ast, never imported or run. Per name:
  * model_args = dict(...) in the registering function, plus keywords of its _create_* call
    (deit's distilled=True);
  * timm_class: the class the _create_* helper builds (VisionTransformer, Eva, Beit, Cait, VisionTransformerDistilled);
  * norm_layer=partial(LayerNorm, eps=X) becomes eps X; act_layer nn.GELU / nn.SiLU / 'quick_gelu' ...
    becomes act gelu / silu / quick_gelu; other callables (block_fn, mlp_layer, norm_layer=RmsNorm ...)
    are kept as their names, so attnscope can refuse what it does not run;
  * img_size, when model_args leave it out: the input size of the name's first pretrained tag in
    default_cfgs (its cfg helper's default, or the tag's own input_size).
"""

import ast
import json
import os
import sys

FILES = {"vision_transformer.py": "VisionTransformer", "eva.py": "Eva", "deit.py": "VisionTransformer",
         "beit.py": "Beit", "cait.py": "Cait"}
CREATE_CLASS = {"_create_vision_transformer": "VisionTransformer", "_create_eva": "Eva", "_create_deit": None,
                "_create_beit": "Beit", "_create_cait": "Cait"}
ACTIVATIONS = {"GELU": "gelu", "SiLU": "silu", "QuickGELU": "quick_gelu", "GELUTanh": "gelu_tanh"}


def name_of(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def value_of(node):
    """A JSON value for an argument expression, or the callable's name as text."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [value_of(item) for item in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -value_of(node.operand)
    if isinstance(node, ast.BinOp):
        left, right = value_of(node.left), value_of(node.right)
        operations = {ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b, ast.Add: lambda a, b: a + b,
                      ast.Sub: lambda a, b: a - b, ast.Pow: lambda a, b: a ** b}
        return operations[type(node.op)](left, right)
    if isinstance(node, ast.Call) and name_of(node.func) == "partial":
        inner = name_of(node.args[0])
        keywords = {k.arg: value_of(k.value) for k in node.keywords}
        return {"partial": inner, **keywords}
    if isinstance(node, ast.Call) and name_of(node.func) == "dict":
        return {k.arg: value_of(k.value) for k in node.keywords}
    return name_of(node)


def convert(args):
    """timm's keyword arguments as attnscope reads them."""
    out = {}
    for key, value in args.items():
        if key == "norm_layer" and isinstance(value, dict) and value.get("partial") in ("LayerNorm", "nn.LayerNorm"):
            if "eps" in value:
                out["eps"] = value["eps"]
        elif key == "norm_layer" and value in ("LayerNorm",):
            continue
        elif key == "act_layer":
            if isinstance(value, dict) and value.get("partial") == "GELU" and value.get("approximate") == "tanh":
                out["act_layer"] = "gelu_tanh"
            else:
                out["act_layer"] = ACTIVATIONS.get(value, value)
        elif isinstance(value, dict):
            out[key] = value.get("partial") or json.dumps(value, sort_keys=True)
        elif isinstance(value, list) and len(value) == 2 and key in ("img_size", "ref_feat_shape", "patch_size"):
            out[key] = value if value[0] != value[1] else value[0]
        else:
            out[key] = value
    return out


def cfg_defaults(tree):
    """{cfg helper name: its default input size side}."""
    defaults = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("cfg"):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict):
                    for key, value in zip(inner.keys, inner.values):
                        if isinstance(key, ast.Constant) and key.value == "input_size":
                            defaults[node.name] = value_of(value)[-1]
    return defaults


def tag_sizes(tree, defaults):
    """{architecture: input side of its first pretrained tag}."""
    sizes = {}
    for table in ast.walk(tree):
        # generate_default_cfgs({...}) or default_cfgs = {...}: 'architecture.tag': helper(...)
        if isinstance(table, ast.Dict):
            for key, value in zip(table.keys, table.values):
                if not isinstance(key, ast.Constant) or not isinstance(key.value, str) or \
                        not isinstance(value, ast.Call):
                    continue
                architecture = key.value.split(".")[0]
                if architecture in sizes:
                    continue
                side = defaults.get(name_of(value.func))
                for keyword in value.keywords:
                    if keyword.arg == "input_size":
                        side = value_of(keyword.value)[-1]
                if side:
                    sizes[architecture] = side
    return sizes


def registered(path, default_class):
    tree = ast.parse(open(path).read())
    sizes = tag_sizes(tree, cfg_defaults(tree))
    entries = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any(name_of(d) == "register_model" for d in node.decorator_list):
            continue
        args, timm_class = {}, default_class
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and any(name_of(t) == "model_args" for t in inner.targets):
                value = value_of(inner.value)
                if isinstance(value, dict):
                    args.update(value)
                elif isinstance(inner.value, ast.Dict):
                    args.update({k.value: value_of(v) for k, v in zip(inner.value.keys, inner.value.values)})
            if isinstance(inner, ast.Call) and name_of(inner.func) in CREATE_CLASS:
                timm_class = CREATE_CLASS[name_of(inner.func)] or default_class
                for keyword in inner.keywords:
                    if keyword.arg == "distilled" and value_of(keyword.value) is True:
                        timm_class = "VisionTransformerDistilled"
                        args["distilled"] = True
        if not args:
            continue
        args = convert(args)
        if "img_size" not in args and node.name in sizes:
            args["img_size"] = sizes[node.name]
        args["timm_class"] = timm_class
        entries.append((node.name, args))
    return entries


def main():
    source = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "models",
                                                                "timm_registered.inc")
    lines = ["// Generated by scripts/timm_registry.py from timm's sources: do not edit, rerun it.",
             "// Each name timm registers for a ViT, EVA, DeiT, BEiT or CaiT, with its constructor's keyword arguments."]
    count = 0
    for file, default_class in FILES.items():
        for name, args in registered(os.path.join(source, "timm", "models", file), default_class):
            text = json.dumps(args, sort_keys=True, separators=(",", ":"))
            lines.append('{"%s", R"(%s)"},' % (name, text))
            count += 1
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(out + ".tmp", out)
    print("timm_registry: %d names written to %s" % (count, out))


if __name__ == "__main__":
    main()
