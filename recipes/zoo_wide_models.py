"""The models of the wide zoo (recipes/zoo_wide.py): a registry, name -> Entry.

Every entry builds its model from code or a config object (random weights,
nothing downloaded) and makes its example inputs. The driver calls
`build(name)` after torch.manual_seed(0); it returns the model (in eval mode),
positional args, keyword args, dynamic_shapes (or None) and a one-line
description of the configuration that was used.

Families:
  vision        torchvision image classification, one entry per builder
  segmentation  torchvision semantic segmentation
  detection     torchvision detection and optical flow (export often fails)
  transformers  Hugging Face transformers, tiny configs, eager/sdpa, batch 1/2
  nn            torch.nn recurrent, transformer, attention, conv, pool, pad modules
  exportdb      torch's ExportDB examples (torch._export.db.examples)
  dynamic       dims kept symbolic, checked at three sizes
  state         modules that update buffers in place (KV caches, running
                statistics, rotary caches), Hugging Face decoders with their
                static KV cache, torchvision models in training mode
  variants      export variants: strict, saved after run_decompositions(),
                preserve_module_call_signature, extra files, Dim.AUTO
  timm          newer timm architectures from timm's builders (ViT relatives,
                hybrid CNN-attention, re-parameterisable and normalizer-free nets)
  moe           Hugging Face mixture-of-experts decoders from tiny configs
  diffusion     diffusers' UNets, VAE encoder and decoder, DiT from small configs

Where a torchvision builder would give a model over ~12M parameters, the same
architecture class is built with narrower layers (same depth, same block
types); the description says what was reduced. Norm layers get random affine
parameters and running statistics, so eval-mode batch norm is not an identity,
and weights a builder sets to zero (torchvision's ViT head) get random values.
"""

import dataclasses
from typing import Callable

import torch
import torch.nn as nn

NUM_CLASSES = 10


@dataclasses.dataclass
class Entry:
    name: str
    family: str
    make: Callable  # () -> (model, args, kwargs, dynamic_shapes, config)
    # Input sets checked (dynamic family: the exported size, then others of
    # the dynamic dims); with more than one, make()'s inputs takes the index.
    sizes: int = 1
    # Built in training mode (family "state": batch norms update their
    # running statistics; only models whose training forward is not random)
    train: bool = False
    # How it is exported (family "variants"): None (torch.export.export,
    # non-strict), "strict", "decomposed" (saved after run_decompositions()),
    # "preserve:<submodule>" (preserve_module_call_signature), "extra_files"
    # (torch.export.save with extra files in the archive)
    variant: str = None


REGISTRY: dict = {}


def _reg(name, family, make, sizes=1, train=False, variant=None):
    assert name not in REGISTRY, name
    REGISTRY[name] = Entry(name, family, make, sizes, train, variant)


def randomize_norms(model):
    """Random affine parameters and running stats for every norm layer."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._NormBase):
                if getattr(m, "running_mean", None) is not None:
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            if isinstance(m, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)):
                w = getattr(m, "weight", None)
                b = getattr(m, "bias", None)
                if isinstance(w, torch.Tensor):
                    w.copy_(torch.rand(w.shape, generator=g) + 0.5)
                if isinstance(b, torch.Tensor):
                    b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    return model


def randomize_zero_weights(model):
    """Weights a builder initialises to zero (torchvision's ViT head) get small
    random values, so the outputs are not all zero."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.numel() and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return model


def nparams(model):
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------
# torchvision classification
# --------------------------------------------------------------------------

IMG = (1, 3, 64, 64)


def _image(*shape):
    return lambda: (torch.randn(*shape),)


def _tv(name, build, config, shape=IMG, family="vision"):
    def make():
        m = build()
        return m, _image(*shape), {}, None, config
    _reg(name, family, make)


def _builder(name, **kw):
    def b():
        import torchvision.models as M
        return M.get_model(name, weights=None, num_classes=NUM_CLASSES, **kw)
    return b


def slim_resnet(block_name, layers, width=16, groups=1, width_per_group=64, dilation=None, num_classes=NUM_CLASSES):
    """torchvision's ResNet with the stage widths 64/128/256/512 replaced by
    width * 1/2/4/8 (same blocks, layer counts, groups, width per group)."""
    from torchvision.models import resnet as R

    block = getattr(R, block_name)

    class SlimResNet(R.ResNet):
        def __init__(self):
            nn.Module.__init__(self)
            self._norm_layer = nn.BatchNorm2d
            self.inplanes = width
            self.dilation = 1
            rswd = dilation or [False, False, False]
            self.groups = groups
            self.base_width = width_per_group
            self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, width, layers[0])
            self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2, dilate=rswd[0])
            self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2, dilate=rswd[1])
            self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2, dilate=rswd[2])
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

    return SlimResNet()


def _vision():
    # ResNet family
    for n in ("resnet18", "resnet34", "resnet50"):
        _tv(n, _builder(n), "builder as is")
    for n, layers, groups, wpg in (
        ("resnet101", [3, 4, 23, 3], 1, 64),
        ("resnet152", [3, 8, 36, 3], 1, 64),
        ("resnext50_32x4d", [3, 4, 6, 3], 32, 4),
        ("resnext101_32x8d", [3, 4, 23, 3], 32, 8),
        ("resnext101_64x4d", [3, 4, 23, 3], 64, 4),
        ("wide_resnet50_2", [3, 4, 6, 3], 1, 128),
        ("wide_resnet101_2", [3, 4, 23, 3], 1, 128),
    ):
        _tv(n, (lambda layers=layers, groups=groups, wpg=wpg:
                slim_resnet("Bottleneck", layers, 16, groups, wpg)),
            f"ResNet(Bottleneck, {layers}, groups={groups}, width_per_group={wpg}), "
            "stage widths 16/32/64/128 (builder: 64/128/256/512)")

    # AlexNet, VGG: builder features; classifier hidden 4096 -> 256
    def alexnet():
        import torchvision.models as M
        m = M.alexnet(weights=None, num_classes=NUM_CLASSES)
        m.classifier[1] = nn.Linear(256 * 6 * 6, 256)
        m.classifier[4] = nn.Linear(256, 256)
        m.classifier[6] = nn.Linear(256, NUM_CLASSES)
        return m
    _tv("alexnet", alexnet, "builder; classifier hidden 4096 -> 256")

    for cfg_name, n in (("A", "vgg11"), ("B", "vgg13"), ("D", "vgg16"), ("E", "vgg19")):
        for bn in (False, True):
            def vgg(cfg_name=cfg_name, bn=bn):
                from torchvision.models import vgg as V
                cfg = [c if c == "M" else c // 4 for c in V.cfgs[cfg_name]]
                m = V.VGG(V.make_layers(cfg, batch_norm=bn), num_classes=NUM_CLASSES, init_weights=True)
                m.classifier = nn.Sequential(
                    nn.Linear(128 * 7 * 7, 256), nn.ReLU(True), nn.Dropout(),
                    nn.Linear(256, 256), nn.ReLU(True), nn.Dropout(), nn.Linear(256, NUM_CLASSES))
                return m
            _tv(n + ("_bn" if bn else ""), vgg,
                f"VGG cfg {cfg_name}{' + BN' if bn else ''}, conv widths / 4, classifier hidden 4096 -> 256")

    # ConvNeXt: channels / 8
    for n, depths, dims in (
        ("convnext_tiny", [3, 3, 9, 3], [96, 192, 384, 768]),
        ("convnext_small", [3, 3, 27, 3], [96, 192, 384, 768]),
        ("convnext_base", [3, 3, 27, 3], [128, 256, 512, 1024]),
        ("convnext_large", [3, 3, 27, 3], [192, 384, 768, 1536]),
    ):
        def cnx(depths=depths, dims=dims):
            from torchvision.models.convnext import CNBlockConfig, ConvNeXt
            d = [c // 8 for c in dims]
            setting = [CNBlockConfig(d[i], d[i + 1] if i < 3 else None, depths[i]) for i in range(4)]
            return ConvNeXt(setting, stochastic_depth_prob=0.1, num_classes=NUM_CLASSES)
        _tv(n, cnx, f"ConvNeXt depths {depths}, channels {[c // 8 for c in dims]} (builder: {dims})")

    # DenseNet: growth rate and stem / 4
    for n, growth, blocks, init in (
        ("densenet121", 32, (6, 12, 24, 16), 64),
        ("densenet161", 48, (6, 12, 36, 24), 96),
        ("densenet169", 32, (6, 12, 32, 32), 64),
        ("densenet201", 32, (6, 12, 48, 32), 64),
    ):
        def dn(growth=growth, blocks=blocks, init=init):
            from torchvision.models.densenet import DenseNet
            return DenseNet(growth // 4, blocks, init // 4, num_classes=NUM_CLASSES)
        _tv(n, dn, f"DenseNet blocks {blocks}, growth {growth // 4}, stem {init // 4} (builder: {growth}, {init})")

    # EfficientNet B0-B3 as is; B4-B7 at a quarter of their width (depth kept)
    for i, (w, d, drop) in enumerate(((1.0, 1.0, 0.2), (1.0, 1.1, 0.2), (1.1, 1.2, 0.3), (1.2, 1.4, 0.3),
                                      (1.4, 1.8, 0.4), (1.6, 2.2, 0.4), (1.8, 2.6, 0.5), (2.0, 3.1, 0.5))):
        n = f"efficientnet_b{i}"
        if i <= 3:
            _tv(n, _builder(n), "builder as is")
        else:
            def eff(w=w, d=d, drop=drop, n=n):
                from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
                setting, last = _efficientnet_conf(n, width_mult=w / 4, depth_mult=d)
                return EfficientNet(setting, drop, last_channel=last, num_classes=NUM_CLASSES)
            _tv(n, eff, f"EfficientNet width_mult {w / 4:g} (builder: {w}), depth_mult {d}")
    for n in ("efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"):
        def effv2(n=n):
            from torchvision.models.efficientnet import (EfficientNet, FusedMBConvConfig, MBConvConfig,
                                                         _efficientnet_conf, _make_divisible)
            setting, last = _efficientnet_conf(n)
            small = []
            for c in setting:
                ic, oc = _make_divisible(c.input_channels / 4, 8), _make_divisible(c.out_channels / 4, 8)
                if isinstance(c, FusedMBConvConfig):
                    small.append(FusedMBConvConfig(c.expand_ratio, c.kernel, c.stride, ic, oc, c.num_layers))
                else:
                    small.append(MBConvConfig(c.expand_ratio, c.kernel, c.stride, ic, oc, c.num_layers))
            return EfficientNet(small, 0.2, norm_layer=partial_bn(1e-3), last_channel=last // 4,
                                num_classes=NUM_CLASSES)
        _tv(n, effv2, "EfficientNetV2 channels / 4 (depth kept), last channel 320")

    _tv("googlenet", _builder("googlenet", aux_logits=True, init_weights=False),
        "builder (aux_logits=True, unused in eval)")
    _tv("inception_v3", _builder("inception_v3", aux_logits=True, init_weights=False),
        "builder (aux_logits=True, unused in eval), input 96x96", shape=(1, 3, 96, 96))

    def maxvit():
        from torchvision.models.maxvit import MaxVit
        return MaxVit(input_size=(128, 128), stem_channels=16, partition_size=4,
                      block_channels=[16, 32, 64, 128], block_layers=[2, 2, 5, 2], head_dim=8,
                      stochastic_depth_prob=0.2, num_classes=NUM_CLASSES)
    _tv("maxvit_t", maxvit, "MaxVit layers [2,2,5,2], channels 16..128 (builder: 64..512), head_dim 8, "
        "partition 4, input 128x128", shape=(1, 3, 128, 128))

    for n in ("mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"):
        _tv(n, _builder(n), "builder as is")
    _tv("mobilenet_v2", _builder("mobilenet_v2", width_mult=0.5), "builder, width_mult=0.5")
    _tv("mobilenet_v3_large", _builder("mobilenet_v3_large", width_mult=0.5), "builder, width_mult=0.5")
    _tv("mobilenet_v3_small", _builder("mobilenet_v3_small"), "builder as is")

    regnets = {
        "regnet_y_400mf": (16, 48, 27.89, 2.09, 8, 0.25), "regnet_y_800mf": (14, 56, 38.84, 2.4, 16, 0.25),
        "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25), "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25),
        "regnet_y_8gf": (17, 192, 76.82, 2.19, 56, 0.25), "regnet_y_16gf": (18, 200, 106.23, 2.48, 112, 0.25),
        "regnet_y_32gf": (20, 232, 115.89, 2.53, 232, 0.25), "regnet_y_128gf": (27, 456, 160.83, 2.52, 264, 0.25),
        "regnet_x_400mf": (22, 24, 24.48, 2.54, 16, None), "regnet_x_800mf": (16, 56, 35.73, 2.28, 16, None),
        "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24, None), "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48, None),
        "regnet_x_8gf": (23, 80, 49.56, 2.88, 120, None), "regnet_x_16gf": (22, 216, 55.59, 2.1, 128, None),
        "regnet_x_32gf": (23, 320, 69.86, 2.0, 168, None),
    }
    for n, (depth, w0, wa, wm, gw, se) in regnets.items():
        if n.endswith(("400mf", "800mf")):
            _tv(n, _builder(n), "builder as is")
            continue
        f = 4 if n.endswith(("1_6gf", "3_2gf")) else 8

        def rn(depth=depth, w0=w0, wa=wa, wm=wm, gw=gw, se=se, f=f):
            from torchvision.models.regnet import BlockParams, RegNet
            p = BlockParams.from_init_params(depth=depth, w_0=max(8, int(round(w0 / f / 8)) * 8), w_a=wa / f,
                                             w_m=wm, group_width=max(4, gw // f), se_ratio=se)
            return RegNet(p, num_classes=NUM_CLASSES)
        _tv(n, rn, f"RegNet depth {depth}, w_0/w_a/group_width / {f}")

    for n in ("shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
              "squeezenet1_0", "squeezenet1_1"):
        _tv(n, _builder(n), "builder as is")

    for n, depths, dim, heads, win, v2 in (
        ("swin_t", [2, 2, 6, 2], 96, [3, 6, 12, 24], 7, False),
        ("swin_s", [2, 2, 18, 2], 96, [3, 6, 12, 24], 7, False),
        ("swin_b", [2, 2, 18, 2], 128, [4, 8, 16, 32], 7, False),
        ("swin_v2_t", [2, 2, 6, 2], 96, [3, 6, 12, 24], 8, True),
        ("swin_v2_s", [2, 2, 18, 2], 96, [3, 6, 12, 24], 8, True),
        ("swin_v2_b", [2, 2, 18, 2], 128, [4, 8, 16, 32], 8, True),
    ):
        def swin(depths=depths, dim=dim, heads=heads, win=win, v2=v2):
            from torchvision.models import swin_transformer as S
            kw = dict(block=S.SwinTransformerBlockV2, downsample_layer=S.PatchMergingV2) if v2 else {}
            return S.SwinTransformer(patch_size=[4, 4], embed_dim=dim // 4, depths=depths,
                                     num_heads=heads,
                                     window_size=[win, win], stochastic_depth_prob=0.2,
                                     num_classes=NUM_CLASSES, **kw)
        _tv(n, swin, f"SwinTransformer{'V2' if v2 else ''} depths {depths}, embed_dim {dim // 4} "
            f"(builder: {dim}), window {win}")
        if n == "swin_v2_t":
            # at 224x224 (stage maps 56/28/14/7): shifted windows with
            # attention masks in three stages; at 64x64 only the first
            _tv("swin_v2_t_224", swin, "SwinTransformerV2 depths [2, 2, 6, 2], embed_dim 24 "
                "(builder: 96), window 8, 224x224 input", shape=(1, 3, 224, 224))

    for n, patch, layers, heads, hidden, mlp, img in (
        ("vit_b_16", 16, 12, 12, 768, 3072, 64), ("vit_b_32", 32, 12, 12, 768, 3072, 64),
        ("vit_l_16", 16, 24, 16, 1024, 4096, 64), ("vit_l_32", 32, 24, 16, 1024, 4096, 64),
        ("vit_h_14", 14, 32, 16, 1280, 5120, 56),
    ):
        def vit(patch=patch, layers=layers, heads=heads, hidden=hidden, mlp=mlp, img=img):
            from torchvision.models.vision_transformer import VisionTransformer
            return VisionTransformer(image_size=img, patch_size=patch, num_layers=layers, num_heads=heads,
                                     hidden_dim=hidden // 16, mlp_dim=mlp // 16, num_classes=NUM_CLASSES)
        _tv(n, vit, f"VisionTransformer {layers} layers, {heads} heads, hidden {hidden // 16} (builder: {hidden}), "
            f"input {img}x{img}", shape=(1, 3, img, img))


def partial_bn(eps):
    import functools
    return functools.partial(nn.BatchNorm2d, eps=eps)


# --------------------------------------------------------------------------
# torchvision segmentation, detection, optical flow
# --------------------------------------------------------------------------


class SegWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m(x)
        return tuple(out[k] for k in sorted(out))


def _segmentation():
    def seg_resnet(kind, layers):
        def b():
            from torchvision.models._utils import IntermediateLayerGetter
            from torchvision.models.segmentation.deeplabv3 import DeepLabHead, DeepLabV3
            from torchvision.models.segmentation.fcn import FCN, FCNHead
            bb = slim_resnet("Bottleneck", layers, 16, dilation=[False, True, True])
            body = IntermediateLayerGetter(bb, {"layer3": "aux", "layer4": "out"})
            aux = FCNHead(16 * 4 * 4, NUM_CLASSES)
            if kind == "fcn":
                return SegWrap(FCN(body, FCNHead(16 * 8 * 4, NUM_CLASSES), aux))
            return SegWrap(DeepLabV3(body, DeepLabHead(16 * 8 * 4, NUM_CLASSES), aux))
        return b

    for n, kind, layers in (("fcn_resnet50", "fcn", [3, 4, 6, 3]), ("fcn_resnet101", "fcn", [3, 4, 23, 3]),
                            ("deeplabv3_resnet50", "deeplabv3", [3, 4, 6, 3]),
                            ("deeplabv3_resnet101", "deeplabv3", [3, 4, 23, 3])):
        _tv(n, seg_resnet(kind, layers), f"{kind} head on a dilated ResNet{layers} with stage widths 16..128 "
            "(builder: 64..512), aux head", family="segmentation")
    for n in ("deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"):
        def b(n=n):
            import torchvision.models.segmentation as S
            kw = {} if n.startswith("lraspp") else {"aux_loss": True}
            return SegWrap(getattr(S, n)(weights=None, weights_backbone=None, num_classes=NUM_CLASSES, **kw))
        _tv(n, b, "builder (num_classes=10" + (", aux_loss" if n.startswith("deeplab") else "") + ")",
            family="segmentation")


class DetWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m([x[0]])
        return tuple(out[0][k] for k in sorted(out[0]))


class FlowWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, a, b):
        return self.m(a, b, num_flow_updates=2)[-1]


def _detection():
    small = {"min_size": 64, "max_size": 64}
    for n, kw in (
        ("fasterrcnn_mobilenet_v3_large_320_fpn", small), ("fasterrcnn_mobilenet_v3_large_fpn", small),
        ("fasterrcnn_resnet50_fpn", small), ("fasterrcnn_resnet50_fpn_v2", small),
        ("fcos_resnet50_fpn", small), ("keypointrcnn_resnet50_fpn", small),
        ("maskrcnn_resnet50_fpn", small), ("maskrcnn_resnet50_fpn_v2", small),
        ("retinanet_resnet50_fpn", small), ("retinanet_resnet50_fpn_v2", small),
        ("ssd300_vgg16", {}), ("ssdlite320_mobilenet_v3_large", {}),
    ):
        def b(n=n, kw=kw):
            import torchvision.models.detection as D
            nc = 2 if n.startswith("keypoint") else 3
            return DetWrap(getattr(D, n)(weights=None, weights_backbone=None, num_classes=nc, **kw))
        _tv(n, b, "builder, num_classes 3 (keypoint: 2)" + (", min/max size 64" if kw else "")
            + "; wrapper: one image, sorted output dict", family="detection")
    for n in ("raft_small", "raft_large"):
        def b(n=n):
            import torchvision.models.optical_flow as O
            return FlowWrap(getattr(O, n)(weights=None))

        def make(n=n, b=b):
            m = b()
            return m, lambda: (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128)), {}, None, \
                "builder, num_flow_updates=2, last flow only, 128x128 (the smallest the correlation pyramid takes)"
        _reg(n, "detection", make)


# --------------------------------------------------------------------------
# transformers
# --------------------------------------------------------------------------


class HFWrap(nn.Module):
    """Passes the inputs by keyword and returns the named outputs as a tuple."""

    def __init__(self, m, names, outputs, extra=None):
        super().__init__()
        self.m = m
        self.names = names
        self.outputs = outputs
        self.extra = extra or {}

    def forward(self, *args):
        out = self.m(**dict(zip(self.names, args)), **self.extra, return_dict=True)
        return tuple(out[k] for k in self.outputs)


SEQ = 8
VOCAB = 100


def _text(batch, pad_id=0, mask=True, seq=SEQ, eos=None):
    def f():
        ids = torch.randint(3, VOCAB - 1, (batch, seq))
        if eos is not None:
            ids[:, -1] = eos
        am = torch.ones(batch, seq, dtype=torch.int64)
        if batch > 1:
            am[1, seq - 3:] = 0
            ids[1, seq - 3:] = pad_id
            if eos is not None:
                ids[1, seq - 4] = eos
        return (ids, am) if mask else (ids,)
    return f


def _transformers():
    import transformers as T

    def common(**kw):
        base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
        base.update(kw)
        return base

    specs = {
        # name: (model class, config class, config kwargs, input kind, outputs, extra forward kwargs)
        "bert": ("BertModel", "BertConfig", common(), "text", ["last_hidden_state", "pooler_output"], {}),
        "roberta": ("RobertaModel", "RobertaConfig", common(max_position_embeddings=66, pad_token_id=1),
                    "text_pad1", ["last_hidden_state", "pooler_output"], {}),
        "distilbert": ("DistilBertModel", "DistilBertConfig",
                       dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                            max_position_embeddings=64), "text", ["last_hidden_state"], {}),
        "albert": ("AlbertModel", "AlbertConfig", common(embedding_size=16), "text",
                   ["last_hidden_state", "pooler_output"], {}),
        "electra": ("ElectraModel", "ElectraConfig", common(embedding_size=16), "text", ["last_hidden_state"], {}),
        "gpt2": ("GPT2LMHeadModel", "GPT2Config",
                 dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64, bos_token_id=0,
                      eos_token_id=0), "text", ["logits"], {"use_cache": False}),
        "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", common(rotary_pct=0.25), "text", ["logits"],
                     {"use_cache": False}),
        "opt": ("OPTForCausalLM", "OPTConfig",
                dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
                     max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=1),
                "text_pad1", ["logits"], {"use_cache": False}),
        "llama": ("LlamaForCausalLM", "LlamaConfig", common(num_attention_heads=4, num_key_value_heads=2),
                  "text", ["logits"], {"use_cache": False}),
        "mistral": ("MistralForCausalLM", "MistralConfig",
                    common(num_attention_heads=4, num_key_value_heads=2, sliding_window=4), "text", ["logits"],
                    {"use_cache": False}),
        "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", common(num_attention_heads=4, num_key_value_heads=2),
                  "text", ["logits"], {"use_cache": False}),
        "phi": ("PhiForCausalLM", "PhiConfig", common(partial_rotary_factor=0.5), "text", ["logits"],
                {"use_cache": False}),
        "t5_encoder": ("T5EncoderModel", "T5Config",
                       dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                            relative_attention_num_buckets=8), "text", ["last_hidden_state"], {}),
        "t5": ("T5ForConditionalGeneration", "T5Config",
               dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                    num_heads=2, relative_attention_num_buckets=8, decoder_start_token_id=0),
               "seq2seq", ["logits"], {"use_cache": False}),
        "bart": ("BartModel", "BartConfig",
                 dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                      decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                      max_position_embeddings=64, pad_token_id=1),
                 "seq2seq_pad1", ["last_hidden_state", "encoder_last_hidden_state"], {"use_cache": False}),
        "whisper_encoder": ("WhisperModel", "WhisperConfig",
                            dict(vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2, decoder_layers=2,
                                 encoder_attention_heads=2, decoder_attention_heads=2, d_model=32,
                                 encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                                 max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                 decoder_start_token_id=1), "audio_mel", ["last_hidden_state"], {}),
        "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2Config",
                     common(vocab_size=32, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
                     "audio_raw", ["last_hidden_state", "extract_features"], {}),
        "vit": ("ViTModel", "ViTConfig", dict(common(), image_size=32, patch_size=8), "image",
                ["last_hidden_state", "pooler_output"], {}),
        "swin": ("SwinModel", "SwinConfig",
                 dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4),
                 "image", ["last_hidden_state", "pooler_output"], {}),
        "clip_text": ("CLIPTextModel", "CLIPTextConfig",
                      common(max_position_embeddings=16, eos_token_id=VOCAB - 1, projection_dim=16),
                      "text_eos", ["last_hidden_state", "pooler_output"], {}),
        "clip_vision": ("CLIPVisionModel", "CLIPVisionConfig",
                        dict(common(), image_size=32, patch_size=8, projection_dim=16), "image",
                        ["last_hidden_state", "pooler_output"], {}),
    }
    for base, (mcls, ccls, ckw, kind, outs, extra) in specs.items():
        for attn in ("eager", "sdpa"):
            for batch in (1, 2):
                def make(mcls=mcls, ccls=ccls, ckw=ckw, kind=kind, outs=outs, extra=extra, attn=attn,
                         batch=batch, base=base):
                    cfg = getattr(T, ccls)(**ckw, attn_implementation=attn)
                    m = getattr(T, mcls)(cfg)
                    if base == "whisper_encoder":
                        m = m.get_encoder()
                    if kind.startswith("text"):
                        names = ["input_ids", "attention_mask"]
                        pad = 1 if kind == "text_pad1" else 0
                        inputs = _text(batch, pad, eos=VOCAB - 1 if kind == "text_eos" else None)
                    elif kind.startswith("seq2seq"):
                        names = ["input_ids", "attention_mask", "decoder_input_ids"]
                        pad = 1 if kind == "seq2seq_pad1" else 0
                        enc = _text(batch, pad)

                        def inputs(enc=enc):
                            ids, am = enc()
                            return ids, am, torch.randint(3, VOCAB - 1, (batch, 4))
                    elif kind == "audio_mel":
                        names = ["input_features"]

                        def inputs():
                            return (torch.randn(batch, 16, 32),)
                    elif kind == "audio_raw":
                        names = ["input_values"]

                        def inputs():
                            return (torch.randn(batch, 400),)
                    else:
                        names = ["pixel_values"]

                        def inputs():
                            return (torch.randn(batch, 3, 32, 32),)
                    w = HFWrap(m, names, outs, extra)
                    desc = f"{mcls}({ccls} tiny: {', '.join(f'{k}={v}' for k, v in ckw.items())}), " \
                           f"attn {attn}, batch {batch}, inputs {'/'.join(names)} -> {'/'.join(outs)}"
                    return w, inputs, {}, None, desc
                _reg(f"{base}_{attn}_b{batch}", "transformers", make)


# --------------------------------------------------------------------------
# torch.nn modules
# --------------------------------------------------------------------------


class Seq(nn.Module):
    """Applies modules one after another; returns every intermediate result."""

    def __init__(self, *mods):
        super().__init__()
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        outs = []
        for m in self.mods:
            x = m(x)
            outs.append(x)
        return tuple(outs)


class Call(nn.Module):
    """Wraps a module and a function of (module, *inputs)."""

    def __init__(self, m, fn):
        super().__init__()
        self.m = m
        self.fn = fn

    def forward(self, *args):
        return self.fn(self.m, *args)


def _nn_entry(name, build, inputs, config):
    def make():
        return build(), inputs, {}, None, config
    _reg(name, "nn", make)


def _randn(*shape):
    return lambda: (torch.randn(*shape),)


def _nn():
    # recurrent layers
    for kind in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        def mk(kind=kind, **kw):
            if kind == "lstm":
                return nn.LSTM(8, 16, **kw)
            if kind == "gru":
                return nn.GRU(8, 16, **kw)
            return nn.RNN(8, 16, nonlinearity=kind[4:], **kw)
        n_state = 2 if kind == "lstm" else 1
        for suffix, kw, shape in (
            ("l1", dict(num_layers=1), (5, 2, 8)),
            ("l2_bi", dict(num_layers=2, bidirectional=True), (5, 2, 8)),
            ("l2_bi_bf", dict(num_layers=2, bidirectional=True, batch_first=True), (2, 5, 8)),
            ("l3_bf", dict(num_layers=3, batch_first=True), (2, 5, 8)),
            ("unbatched_bi", dict(num_layers=2, bidirectional=True), (5, 8)),
        ):
            _nn_entry(f"{kind}_{suffix}", lambda mk=mk, kw=kw: Call(mk(**kw), lambda m, x: m(x)), _randn(*shape),
                      f"{kind} {kw}, input {list(shape)}; returns output and final state(s)")
        # with initial states given as inputs
        kw = dict(num_layers=2, bidirectional=True, batch_first=True)

        def init_inputs(n_state=n_state):
            x = torch.randn(2, 5, 8)
            states = tuple(torch.randn(4, 2, 16) for _ in range(n_state))
            return (x,) + states
        fn = (lambda m, x, h, c: m(x, (h, c))) if kind == "lstm" else (lambda m, x, h: m(x, h))
        _nn_entry(f"{kind}_h0", lambda mk=mk, kw=kw, fn=fn: Call(mk(**kw), fn), init_inputs,
                  f"{kind} {kw}, initial state(s) as inputs")
    _nn_entry("lstm_proj", lambda: Call(nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True,
                                                proj_size=4), lambda m, x: m(x)),
              _randn(2, 5, 8), "LSTM proj_size=4, 2 layers, bidirectional, batch_first")

    # transformer layers (dropout 0)
    def enc(norm_first, act, bf):
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=act, batch_first=bf,
                                           norm_first=norm_first)
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32) if norm_first else None,
                                     enable_nested_tensor=False)
    _nn_entry("transformer_encoder", lambda: Call(enc(False, "relu", True), lambda m, x: m(x)),
              _randn(2, 6, 32), "TransformerEncoder 2 layers (32, 4 heads, ff 64, relu), batch_first")

    def enc_mask_inputs():
        mask = torch.zeros(2, 6, dtype=torch.bool)
        mask[1, 4:] = True
        return torch.randn(6, 2, 32), mask
    _nn_entry("transformer_encoder_prenorm_mask",
              lambda: Call(enc(True, "gelu", False), lambda m, x, mask: m(x, src_key_padding_mask=mask)),
              enc_mask_inputs, "TransformerEncoder norm_first, gelu, final LayerNorm, seq-first, "
              "src_key_padding_mask (bool input)")

    def dec():
        layer = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0)
        return nn.TransformerDecoder(layer, 2)

    def dec_fn(m, tgt, memory):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[0])
        return m(tgt, memory, tgt_mask=mask, tgt_is_causal=True)
    _nn_entry("transformer_decoder", lambda: Call(dec(), dec_fn),
              lambda: (torch.randn(5, 2, 32), torch.randn(7, 2, 32)),
              "TransformerDecoder 2 layers, seq-first, causal tgt_mask made in forward, tgt_is_causal=True")

    def dec_detect_fn(m, tgt, memory):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[0])
        return m(tgt, memory, tgt_mask=mask)
    _nn_entry("transformer_decoder_detect_causal", lambda: Call(dec(), dec_detect_fn),
              lambda: (torch.randn(5, 2, 32), torch.randn(7, 2, 32)),
              "TransformerDecoder as above without tgt_is_causal (torch then compares the mask with a "
              "causal one at run time)")

    def full_fn(m, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return m(src, tgt, tgt_mask=mask, tgt_is_causal=True)
    _nn_entry("transformer_full",
              lambda: Call(nn.Transformer(32, 4, 1, 1, 64, dropout=0.0, batch_first=True, norm_first=True),
                           full_fn),
              lambda: (torch.randn(2, 7, 32), torch.randn(2, 5, 32)),
              "nn.Transformer 1+1 layers, batch_first, norm_first, causal tgt_mask")

    # multi-head attention
    _nn_entry("mha_self", lambda: Call(nn.MultiheadAttention(32, 4, batch_first=True),
                                       lambda m, x: m(x, x, x)),
              _randn(2, 6, 32), "MultiheadAttention self-attention, batch_first, weights averaged")

    def cross_inputs():
        kpm = torch.zeros(2, 7, dtype=torch.bool)
        kpm[1, 5:] = True
        return torch.randn(5, 2, 32), torch.randn(7, 2, 16), torch.randn(7, 2, 24), kpm
    _nn_entry("mha_cross_kdim",
              lambda: Call(nn.MultiheadAttention(32, 4, kdim=16, vdim=24),
                           lambda m, q, k, v, kpm: m(q, k, v, key_padding_mask=kpm, need_weights=False)[0]),
              cross_inputs, "MultiheadAttention kdim 16, vdim 24, seq-first, bool key_padding_mask, no weights")

    def mask_inputs():
        return torch.randn(2, 5, 32), torch.randn(5, 5)
    _nn_entry("mha_bias_kv_mask",
              lambda: Call(nn.MultiheadAttention(32, 4, add_bias_kv=True, add_zero_attn=True, batch_first=True),
                           lambda m, x, am: m(x, x, x, attn_mask=am, average_attn_weights=False)),
              mask_inputs, "MultiheadAttention add_bias_kv, add_zero_attn, float attn_mask, per-head weights")
    _nn_entry("mha_causal_bool",
              lambda: Call(nn.MultiheadAttention(32, 2, bias=False, batch_first=True),
                           lambda m, x: m(x, x, x, attn_mask=torch.ones(6, 6, dtype=torch.bool).triu(1),
                                          need_weights=False)[0]),
              _randn(2, 6, 32), "MultiheadAttention no bias, bool causal attn_mask, no weights")

    # convolutions
    _nn_entry("conv1d", lambda: Seq(nn.Conv1d(4, 8, 3, stride=2, padding=1), nn.Conv1d(8, 8, 3, groups=4,
                                                                                     dilation=2, padding="same"),
                                    nn.Conv1d(8, 6, 1, bias=False), nn.Conv1d(6, 6, 5, padding="valid")),
              _randn(2, 4, 20), "Conv1d stride 2; groups 4 + dilation 2 + padding same; 1x1 no bias; valid")
    _nn_entry("conv1d_padding_modes",
              lambda: Seq(nn.Conv1d(4, 4, 3, padding=2, padding_mode="reflect"),
                          nn.Conv1d(4, 4, 3, padding=1, padding_mode="replicate"),
                          nn.Conv1d(4, 4, 4, padding=3, padding_mode="circular", stride=2)),
              _randn(2, 4, 12), "Conv1d padding_mode reflect, replicate, circular")
    _nn_entry("conv2d_padding_modes",
              lambda: Seq(nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="reflect"),
                          nn.Conv2d(4, 4, (3, 5), padding=(2, 1), padding_mode="replicate"),
                          nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular", groups=2),
                          nn.Conv2d(4, 4, 3, padding="same", dilation=(2, 1))),
              _randn(1, 3, 10, 12), "Conv2d padding_mode reflect, replicate, circular (groups 2); same + dilation")
    _nn_entry("conv3d",
              lambda: Seq(nn.Conv3d(3, 4, 3, stride=(1, 2, 2), padding=1),
                          nn.Conv3d(4, 4, (1, 3, 3), groups=2, dilation=(1, 2, 2), padding="same"),
                          nn.Conv3d(4, 2, 2, padding=(0, 1, 1), bias=False)),
              _randn(1, 3, 5, 10, 10), "Conv3d stride (1,2,2); groups 2 + dilation + same; no bias")
    _nn_entry("conv3d_padding_modes",
              lambda: Seq(nn.Conv3d(2, 2, 3, padding=1, padding_mode="reflect"),
                          nn.Conv3d(2, 2, 3, padding=1, padding_mode="replicate"),
                          nn.Conv3d(2, 2, 3, padding=1, padding_mode="circular")),
              _randn(1, 2, 4, 5, 6), "Conv3d padding_mode reflect, replicate, circular")
    _nn_entry("conv_transpose1d",
              lambda: Seq(nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1),
                          nn.ConvTranspose1d(6, 4, 3, groups=2, dilation=2),
                          nn.ConvTranspose1d(4, 2, 4, stride=3, bias=False)),
              _randn(2, 4, 7), "ConvTranspose1d stride 2 + output_padding; groups 2 + dilation 2; stride 3")
    _nn_entry("conv_transpose2d",
              lambda: Seq(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
                          nn.ConvTranspose2d(6, 4, (3, 2), stride=(1, 2), groups=2, dilation=(2, 1)),
                          nn.ConvTranspose2d(4, 2, 4, stride=2, padding=(1, 0), bias=False)),
              _randn(1, 4, 5, 6), "ConvTranspose2d output_padding; groups 2 + dilation; asymmetric padding")
    _nn_entry("conv_transpose2d_output_size",
              lambda: Call(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1),
                           lambda m, x: m(x, output_size=[12, 11])),
              _randn(1, 3, 6, 6), "ConvTranspose2d called with output_size=[12, 11]")
    _nn_entry("conv_transpose3d",
              lambda: Seq(nn.ConvTranspose3d(2, 4, 3, stride=(1, 2, 2), padding=1, output_padding=(0, 1, 1)),
                          nn.ConvTranspose3d(4, 2, 2, groups=2, bias=False)),
              _randn(1, 2, 3, 4, 5), "ConvTranspose3d stride (1,2,2) + output_padding; groups 2")

    # pooling: every module of torch.nn.modules.pooling
    pools = [
        ("max_pool1d", lambda: nn.MaxPool1d(3, stride=2, padding=1, dilation=2, ceil_mode=True), (2, 3, 15)),
        ("max_pool1d_indices", lambda: nn.MaxPool1d(2, return_indices=True), (2, 3, 9)),
        ("max_pool2d", lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True), (1, 3, 9, 8)),
        ("max_pool2d_indices", lambda: nn.MaxPool2d(3, stride=2, padding=1, dilation=2, return_indices=True),
         (1, 2, 11, 10)),
        ("max_pool3d", lambda: nn.MaxPool3d(2, stride=2, ceil_mode=True), (1, 2, 5, 6, 7)),
        ("max_pool3d_indices", lambda: nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1),
                                                    return_indices=True), (1, 2, 3, 7, 8)),
        ("avg_pool1d", lambda: nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         (2, 3, 10)),
        ("avg_pool2d", lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=True), (1, 3, 9, 10)),
        ("avg_pool2d_divisor", lambda: nn.AvgPool2d((2, 3), stride=(2, 2), divisor_override=5, ceil_mode=True),
         (1, 3, 7, 9)),
        ("avg_pool3d", lambda: nn.AvgPool3d(2, stride=(1, 2, 2), padding=(0, 1, 1), count_include_pad=False),
         (1, 2, 4, 7, 6)),
        ("adaptive_avg_pool1d", lambda: nn.AdaptiveAvgPool1d(4), (2, 3, 10)),
        ("adaptive_avg_pool2d", lambda: nn.AdaptiveAvgPool2d((3, 5)), (1, 3, 7, 11)),
        ("adaptive_avg_pool2d_up", lambda: nn.AdaptiveAvgPool2d(7), (1, 2, 3, 4)),
        ("adaptive_avg_pool3d", lambda: nn.AdaptiveAvgPool3d((2, 3, None)), (1, 2, 5, 7, 4)),
        ("adaptive_max_pool1d", lambda: nn.AdaptiveMaxPool1d(3, return_indices=True), (2, 3, 10)),
        ("adaptive_max_pool2d", lambda: nn.AdaptiveMaxPool2d((3, 4), return_indices=True), (1, 3, 7, 10)),
        ("adaptive_max_pool3d", lambda: nn.AdaptiveMaxPool3d((2, 2, 3), return_indices=True), (1, 2, 5, 6, 7)),
        ("lp_pool1d", lambda: nn.LPPool1d(2, 3, stride=2), (2, 3, 11)),
        ("lp_pool2d", lambda: nn.LPPool2d(1.5, (2, 3), stride=2, ceil_mode=True), (1, 3, 9, 10)),
        ("lp_pool3d", lambda: nn.LPPool3d(3, 2), (1, 2, 4, 6, 6)),
        ("fractional_max_pool2d",
         lambda: nn.FractionalMaxPool2d(2, output_size=(5, 6), _random_samples=torch.rand(1, 3, 2)), (1, 3, 9, 11)),
        ("fractional_max_pool2d_indices",
         lambda: nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5), return_indices=True,
                                        _random_samples=torch.rand(1, 2, 2)), (1, 2, 10, 12)),
        ("fractional_max_pool3d",
         lambda: nn.FractionalMaxPool3d(2, output_size=(3, 4, 4), _random_samples=torch.rand(1, 2, 3)),
         (1, 2, 6, 8, 7)),
    ]
    for n, b, shape in pools:
        # LPPool raises to a fractional power: positive inputs, or torch itself gives NaN
        inputs = (lambda shape=shape: (torch.rand(*shape) + 0.1,)) if n.startswith("lp_") else _randn(*shape)
        _nn_entry(n, b, inputs, f"{b()!r}, input {list(shape)}" + (" in (0.1, 1.1)" if n.startswith("lp_") else ""))

    _nn_entry("lp_pool2d_signed", lambda: nn.LPPool2d(1.5, (2, 3), stride=2, ceil_mode=True), _randn(1, 3, 9, 10),
              "LPPool2d(1.5, (2, 3), stride 2, ceil_mode) on signed inputs: torch gives NaN where a window "
              "holds a negative value")

    def unpool(dim):
        P = {1: (nn.MaxPool1d, nn.MaxUnpool1d), 2: (nn.MaxPool2d, nn.MaxUnpool2d),
             3: (nn.MaxPool3d, nn.MaxUnpool3d)}[dim]

        class Unpool(nn.Module):
            def __init__(self):
                super().__init__()
                self.pool = P[0](2, stride=2, return_indices=True)
                self.unpool = P[1](2, stride=2)

            def forward(self, x):
                y, i = self.pool(x)
                return self.unpool(y, i), self.unpool(y, i, output_size=x.shape[2:])
        return Unpool()
    # (an odd size along a dim whose window start is not the last makes the
    # default output size too small for torch's own indices: only 1-D and 2-D here)
    for dim, shape in ((1, (2, 3, 9)), (2, (1, 2, 7, 8)), (3, (1, 2, 4, 6, 6))):
        _nn_entry(f"max_unpool{dim}d", lambda dim=dim: unpool(dim), _randn(*shape),
                  f"MaxPool{dim}d(2, return_indices) -> MaxUnpool{dim}d, with and without output_size "
                  f"(input {list(shape)})")

    # padding: every module of torch.nn.modules.padding
    for kind in ("Reflection", "Replication", "Zero", "Constant", "Circular"):
        for dim in (1, 2, 3):
            pad = {1: (2, 1), 2: (1, 2, 2, 0), 3: (1, 0, 2, 1, 0, 2)}[dim]
            shape = {1: (2, 3, 6), 2: (1, 2, 5, 6), 3: (1, 2, 3, 4, 5)}[dim]

            def b(kind=kind, dim=dim, pad=pad):
                cls = getattr(nn, f"{kind}Pad{dim}d")
                return cls(pad, 1.5) if kind == "Constant" else cls(pad)
            _nn_entry(f"{kind.lower()}_pad{dim}d", b, _randn(*shape), f"{b()!r}, input {list(shape)}")
    _nn_entry("zero_pad2d_negative", lambda: nn.ZeroPad2d((-1, 2, 1, -2)), _randn(1, 2, 5, 6),
              "ZeroPad2d((-1, 2, 1, -2)): negative padding crops")


# --------------------------------------------------------------------------
# ExportDB
# --------------------------------------------------------------------------


def _exportdb():
    try:
        torch.manual_seed(0)  # the examples make their inputs at import
        from torch._export.db.examples import all_examples
    except Exception:  # noqa: BLE001 - no ExportDB in this torch
        return
    for name in sorted(all_examples()):
        def make(name=name):
            from torch._export.db.examples import all_examples
            case = all_examples()[name]
            m = case.model
            if not isinstance(m, nn.Module):
                fn = m

                class FnModule(nn.Module):
                    def forward(self, *a, **k):
                        return fn(*a, **k)
                m = FnModule()
            args, kwargs = case.example_args, case.example_kwargs or {}
            return m, (lambda: (args, kwargs)), None, case.dynamic_shapes, \
                f"ExportDB example ({case.support_level.name}; tags {sorted(case.tags)})"
        _reg(f"exportdb_{name}", "exportdb", make)


# --------------------------------------------------------------------------
# Dynamic shapes: exported with torch.export.Dim, checked at three sizes
# --------------------------------------------------------------------------


def _dynamic():
    """Models whose dims stay symbolic in the .pt2: every stage runs the one
    exported graph at the exported size and at two others (other batch and
    sequence lengths, image sizes), against torch eager at each size."""
    import transformers as T
    Dim = torch.export.Dim

    def hf(base, mcls, ccls, ckw, attn, sizes, dyn_batch):
        causal = "Causal" in mcls or "LMHead" in mcls

        def make():
            cfg = getattr(T, ccls)(**ckw, attn_implementation=attn)
            w = HFWrap(getattr(T, mcls)(cfg), ["input_ids", "attention_mask"], ["logits"] if causal
                       else ["last_hidden_state"], {"use_cache": False} if causal else {})
            batch = Dim("batch", min=1, max=16)
            seq = Dim("seq", min=2, max=48)
            dims = {0: batch, 1: seq} if dyn_batch else {1: seq}
            dyn = ((dims, dims),)  # forward(*args)

            def inputs(i=0):
                b, n = sizes[i]
                return _text(b, seq=n)()
            desc = f"{mcls}({ccls} tiny), attn {attn}, dynamic {'batch and ' if dyn_batch else ''}sequence; " \
                   f"checked at (batch, seq) {', '.join(map(str, sizes))}"
            return w, inputs, {}, dyn, desc
        _reg(f"{base}_{attn}_dyn", "dynamic", make, sizes=len(sizes))

    tiny = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64)
    for attn in ("eager", "sdpa"):
        hf("bert", "BertModel", "BertConfig", tiny, attn, [(2, 8), (1, 5), (3, 13)], True)
        hf("llama", "LlamaForCausalLM", "LlamaConfig", dict(tiny, num_attention_heads=4, num_key_value_heads=2),
           attn, [(2, 8), (2, 5), (2, 13)], False)
        hf("gpt2", "GPT2LMHeadModel", "GPT2Config",
           dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64, bos_token_id=0, eos_token_id=0),
           attn, [(2, 8), (1, 5), (3, 13)], True)

    def seq_model(name, build, shape, seq_dim, lens, desc, batch_dim=None, varargs=True):
        def make():
            dims = {}
            if seq_dim is not None:
                dims[seq_dim] = Dim("seq", min=4, max=64)
            if batch_dim is not None:
                dims[batch_dim] = Dim("batch", min=1, max=16)

            def inputs(i=0):
                s = list(shape)
                if seq_dim is not None:
                    s[seq_dim] = lens[i]
                if batch_dim is not None:
                    s[batch_dim] = [shape[batch_dim], 1, 3][i]
                return (torch.randn(*s),)
            sizes = [tuple(inputs(i)[0].shape) for i in range(len(lens))]
            return build(), inputs, {}, ((dims,),) if varargs else (dims,), f"{desc}; checked at shapes {sizes}"
        _reg(name, "dynamic", make, sizes=len(lens))

    # torch 2.15 cannot export nn.LSTM/GRU/RNN with a dynamic sequence length:
    # aten.lstm's decomposition unrolls the sequence while tracing and guards
    # Eq(seq, 5). The batch dim stays dynamic.
    for kind, cls in (("lstm", nn.LSTM), ("gru", nn.GRU), ("rnn", nn.RNN)):
        seq_model(f"{kind}_dyn_batch", lambda cls=cls: Call(cls(8, 16, num_layers=2, bidirectional=True),
                                                           lambda m, x: m(x)),
                  (5, 2, 8), None, [5, 5, 5], f"{cls.__name__}(8, 16, 2 layers, bidirectional), dynamic batch",
                  batch_dim=1)
        seq_model(f"{kind}_dyn_batch_bf",
                  lambda cls=cls: Call(cls(8, 16, batch_first=True), lambda m, x: m(x)),
                  (2, 5, 8), None, [5, 5, 5], f"{cls.__name__}(8, 16, batch_first), dynamic batch",
                  batch_dim=0)

    from zoo import DynScanLSTM, DynSeqOps
    seq_model("lstm_cell_scan_dyn_seq", DynScanLSTM, (2, 5, 8), 1, [5, 4, 11],
              "LSTMCell(8, 16) under torch's scan over a dynamic sequence (batch-first), Linear head",
              batch_dim=0, varargs=False)

    seq_model("seq_ops_dyn", DynSeqOps, (2, 6, 4), 1, [6, 5, 9],
              "conv1d, diff(prepend), reshape(b, -1, 2), reflect pad, max pool, avg pool, repeat, "
              "expand, linear interpolate over a dynamic length", batch_dim=0, varargs=False)

    def cnn():
        from torchvision.models.resnet import BasicBlock, ResNet
        return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=NUM_CLASSES)

    def make_cnn():
        h = Dim("h", min=33, max=128)
        w = Dim("w", min=33, max=128)
        sizes = [(2, 64, 64), (1, 40, 56), (3, 97, 33)]

        def inputs(i=0):
            b, hh, ww = sizes[i]
            return (torch.randn(b, 3, hh, ww),)
        return cnn(), inputs, {}, ({0: Dim("batch", min=1, max=8), 2: h, 3: w},), \
            f"ResNet(BasicBlock, [1, 1, 1, 1]), dynamic batch, height and width; checked at {sizes}"
    _reg("resnet10_dyn_hw", "dynamic", make_cnn, sizes=3)


# --------------------------------------------------------------------------
# State: modules that update buffers in place, models in training mode
# --------------------------------------------------------------------------


class KvIndexCopy(nn.Module):
    """A decode step over a KV cache held in buffers, written with
    index_copy_ at the step's positions; attention over the whole cache."""

    def __init__(self, d=16, t=8):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.register_buffer("k_cache", torch.zeros(1, t, d))
        self.register_buffer("v_cache", torch.zeros(1, t, d))

    def forward(self, x, pos):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        self.k_cache.index_copy_(1, pos, k)
        self.v_cache.index_copy_(1, pos, v)
        return torch.nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache)


class RunningNorm(nn.Module):
    """Normalises by running statistics it updates itself (a step count,
    a moving mean and mean square), as online feature normalisers do."""

    def __init__(self, n=6):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("mean", torch.zeros(n))
        self.register_buffer("sq", torch.ones(n))

    def forward(self, x):
        self.count += 1
        self.mean.lerp_(x.mean(0), 0.1)
        self.sq.lerp_((x * x).mean(0), 0.1)
        return (x - self.mean) / (self.sq - self.mean ** 2).clamp_min(1e-3).sqrt()


class RotaryCache(nn.Module):
    """A rotary embedding whose cos/sin cache is a buffer written in place
    on every call (as Phi-3's rotary module extends its cache)."""

    def __init__(self, d=8, t=12):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
        self.register_buffer("cos_cache", torch.zeros(t, d // 2))
        self.register_buffer("sin_cache", torch.zeros(t, d // 2))

    def forward(self, x):
        t = x.shape[1]
        f = torch.outer(torch.arange(t, dtype=torch.float32), self.inv_freq)
        self.cos_cache[:t].copy_(f.cos())
        self.sin_cache[:t].copy_(f.sin())
        x1, x2 = x[..., ::2], x[..., 1::2]
        c, s_ = self.cos_cache[:t], self.sin_cache[:t]
        return torch.stack((x1 * c - x2 * s_, x1 * s_ + x2 * c), -1).flatten(-2)


class SliceWriteBias(nn.Module):
    """In-place writes through views of a fresh tensor (narrow, a
    transposed contiguous copy, select): BEiT-style relative position
    bias tables."""

    def __init__(self, w=4):
        super().__init__()
        self.table = nn.Parameter(torch.randn(w ** 4, 2))
        self.w = w

    def forward(self, x):
        n = self.w * self.w
        bias = torch.zeros(n + 1, n + 1, 2)
        bias.narrow(0, 1, n).narrow(1, 1, n).add_(self.table[: n * n].view(n, n, 2))
        bias[0, :].fill_(0.5)
        bias[:, 0].fill_(-0.5)
        b = bias.permute(2, 0, 1).contiguous()
        b.mul_(2)
        return x + b.sum(0)


def _state():
    _reg("state_kv_index_copy", "state",
         lambda: (KvIndexCopy(), lambda: (torch.randn(1, 2, 16), torch.tensor([3, 5])), {}, None,
                  "KV cache in buffers written by index_copy_ at two positions, SDPA over the cache"))
    _reg("state_running_norm", "state",
         lambda: (RunningNorm(), lambda: (torch.randn(5, 6),), {}, None,
                  "running count (int64 +=), mean and mean square (lerp_) as buffers"))
    _reg("state_rotary_cache", "state",
         lambda: (RotaryCache(), lambda: (torch.randn(2, 7, 8),), {}, None,
                  "rotary cos/sin caches written in place (copy_ into a slice of a buffer)"))
    _reg("state_slice_write_bias", "state",
         lambda: (SliceWriteBias(), lambda: (torch.randn(17, 17),), {}, None,
                  "relative position bias built by in-place writes through narrow, select, a contiguous copy"))
    for name, build, desc in (
        ("resnet18", lambda: slim_resnet("BasicBlock", [2, 2, 2, 2]), "slim ResNet-18"),
        ("mobilenet_v3_small", _builder("mobilenet_v3_small", dropout=0.0), "MobileNetV3-small, dropout 0"),
        ("regnet_y_400mf", _builder("regnet_y_400mf"), "RegNetY-400MF"),
        ("densenet121_slim", lambda: __import__("torchvision.models", fromlist=["DenseNet"]).DenseNet(
            growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, num_classes=NUM_CLASSES),
         "DenseNet(growth 8, blocks 2-2-2-2)"),
    ):
        _reg(f"train_{name}", "state",
             lambda build=build, desc=desc: (build(), _image(2, 3, 64, 64), {}, None,
                                             f"{desc} in training mode: batch norms use batch statistics "
                                             "and update their running statistics"),
             train=True)
    try:
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM  # noqa: F401
    except Exception:  # noqa: BLE001 - no ExecuTorch wrapper in this transformers
        return
    import transformers as T

    def static_cache(ccls, mcls, ckw):
        def make():
            from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
            m = getattr(T, mcls)(getattr(T, ccls)(**ckw)).eval()
            m.generation_config = T.GenerationConfig(use_cache=True, cache_implementation="static",
                                                     max_length=16,
                                                     cache_config={"batch_size": 1, "max_cache_len": 16})
            w = TorchExportableModuleForDecoderOnlyLM(m, batch_size=1, max_cache_len=16)

            class Kw(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = w

                def forward(self, input_ids, cache_position):
                    # (the wrapper's own forward drops cache_position in
                    # transformers 5.24: its inner module takes it)
                    return self.w.model(input_ids=input_ids, cache_position=cache_position)
            return Kw(), lambda: (torch.tensor([[7]]), torch.tensor([0])), {}, None, \
                f"{mcls}({ccls} tiny) with its static KV cache in buffers (transformers' ExecuTorch wrapper), " \
                "one decode step"
        return make
    tiny = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64)
    _reg("static_cache_llama", "state", static_cache("LlamaConfig", "LlamaForCausalLM", tiny))
    _reg("static_cache_qwen2", "state", static_cache("Qwen2Config", "Qwen2ForCausalLM", tiny))
    _reg("static_cache_phi3", "state", static_cache("Phi3Config", "Phi3ForCausalLM",
                                                    dict(tiny, pad_token_id=0)))
    _reg("static_cache_gemma", "state", static_cache("GemmaConfig", "GemmaForCausalLM",
                                                     dict(tiny, head_dim=8)))


# --------------------------------------------------------------------------
# Export variants: the same kinds of model exported the other ways users do
# --------------------------------------------------------------------------


def _variants():
    import transformers as T

    def bert():
        cfg = T.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=64)
        return HFWrap(T.BertModel(cfg), ["input_ids", "attention_mask"], ["last_hidden_state"])

    for variant in ("strict", "decomposed", "extra_files", "preserve:layer2"):
        tag = variant.split(":")[0]
        _reg(f"{tag}_resnet18", "variants",
             lambda: (slim_resnet("BasicBlock", [2, 2, 2, 2]), _image(1, 3, 64, 64), {}, None,
                      "slim ResNet-18"), variant=variant)
    for variant in ("strict", "decomposed", "extra_files"):
        _reg(f"{variant}_bert", "variants", lambda: (bert(), _text(2), {}, None, "BertModel (tiny), sdpa"),
             variant=variant)
    _reg("preserve_bert_encoder", "variants",
         lambda: (bert(), _text(2), {}, None, "BertModel (tiny), sdpa"), variant="preserve:m.encoder")
    _reg("strict_mobilenet_v3_small", "variants",
         lambda: (_builder("mobilenet_v3_small")(), _image(1, 3, 64, 64), {}, None, "MobileNetV3-small"),
         variant="strict")
    Dim = torch.export.Dim
    _reg("auto_resnet18_batch", "variants",
         lambda: (slim_resnet("BasicBlock", [2, 2, 2, 2]), lambda i=0: (torch.randn([2, 3, 5][i], 3, 64, 64),),
                  {}, ({0: Dim.AUTO},),
                  "slim ResNet-18, batch exported with Dim.AUTO (torch specialises 0 and 1 away: the range "
                  "is [2, inf]); checked at batch 2, 3, 5"),
         sizes=3)
    _reg("auto_bert_seq", "variants",
         lambda: (bert(), lambda i=0: _text(2, seq=[8, 5, 13][i])(), {},
                  (({1: Dim.AUTO}, {1: Dim.AUTO}),),
                  "BertModel (tiny), sequence exported with Dim.AUTO; checked at 8, 5, 13"),
         sizes=3)


# --------------------------------------------------------------------------
# timm: newer vision families, from timm's own builders (random weights)
# --------------------------------------------------------------------------


def _timm():
    try:
        import timm  # noqa: F401
    except Exception:  # noqa: BLE001 - no timm in this environment
        return
    vit_small = dict(depth=2, embed_dim=64, num_heads=2)
    for name, kw, size, note in (
        ("efficientvit_m0", {}, 224, "autocast-disabled attention region"),
        ("levit_128s", {}, 224, "reshape_as, attention biases"),
        ("nf_resnet26", {}, 64, "normalizer-free: scaled weight standardisation"),
        ("beit_base_patch16_224", vit_small, 224, "relative position bias (in-place writes through views)"),
        ("vit_small_patch14_dinov2", dict(vit_small, img_size=70), 70, "DINOv2: register-free ViT, layer scale"),
        ("crossvit_tiny_240", {}, 240, "two-branch cross attention, bicubic resampling"),
        ("convnextv2_atto", {}, 64, "global response norm"),
        ("swin_tiny_patch4_window7_224", dict(embed_dim=24, depths=(1, 1, 2, 1), num_heads=(1, 2, 2, 4)), 224,
         "shifted windows (roll), relative position bias"),
        ("mobilevitv2_050", {}, 128, "separable self-attention"),
        ("repvit_m1", {}, 224, "re-parameterisable convolutions"),
        ("fastvit_t8", {}, 128, "RepMixer, large-kernel convolutions"),
        ("edgenext_xx_small", {}, 128, "split depthwise transpose attention"),
        ("eva02_tiny_patch14_224", dict(depth=2), 224, "rotary position embeddings, SwiGLU"),
        ("ghostnetv2_100", {}, 64, "ghost modules, DFC attention"),
        ("hgnetv2_b0", {}, 64, "HGNetV2 stem and stages"),
        ("tiny_vit_5m_224", {}, 224, "TinyViT"),
        ("efficientformerv2_s0", {}, 224, "EfficientFormerV2"),
        ("resnest14d", {}, 64, "split attention"),
        ("xcit_nano_12_p16_224", dict(depth=2), 224, "cross-covariance attention, class attention"),
        ("pvt_v2_b0", {}, 64, "spatial-reduction attention"),
        ("inception_next_atto", {}, 64, "inception depthwise convolutions"),
        ("coat_lite_tiny", {}, 224, "conv-attentional: factorised attention"),
        ("mambaout_femto", {}, 64, "gated CNN blocks"),
    ):
        def make(name=name, kw=kw, size=size, note=note):
            import timm
            m = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES, **kw)
            return m, _image(1, 3, size, size), {}, None, \
                f"timm {name}{' ' + str(kw) if kw else ''}, input {size}x{size}: {note}"
        _reg(f"timm_{name}", "timm", make)


# --------------------------------------------------------------------------
# Mixture of experts: Hugging Face MoE decoders from tiny configs
# --------------------------------------------------------------------------


def _moe():
    import transformers as T
    base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64)
    for cname, mname, extra in (
        ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
        ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", dict(num_experts=4, num_experts_per_tok=2,
                                                      moe_intermediate_size=32,
                                                      shared_expert_intermediate_size=32)),
        ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(num_experts=4, num_experts_per_tok=2,
                                                      moe_intermediate_size=32, head_dim=8)),
        ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=4, num_experts_per_tok=2)),
        ("GraniteMoeConfig", "GraniteMoeForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
        ("PhimoeConfig", "PhimoeForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
        # (multi-head latent attention: as many key/value heads as heads;
        # the rotary part as wide as a head; one expert group)
        ("DeepseekV2Config", "DeepseekV2ForCausalLM", dict(n_routed_experts=4, num_experts_per_tok=2,
                                                          moe_intermediate_size=32, first_k_dense_replace=1,
                                                          kv_lora_rank=16, q_lora_rank=None,
                                                          qk_rope_head_dim=8, qk_nope_head_dim=8,
                                                          v_head_dim=8, n_shared_experts=1, n_group=1,
                                                          topk_group=1, num_key_value_heads=4)),
        ("DeepseekV3Config", "DeepseekV3ForCausalLM", dict(n_routed_experts=4, num_experts_per_tok=2,
                                                          moe_intermediate_size=32, first_k_dense_replace=1,
                                                          kv_lora_rank=16, q_lora_rank=16,
                                                          qk_rope_head_dim=8, qk_nope_head_dim=8,
                                                          v_head_dim=8, n_shared_experts=1, n_group=1,
                                                          topk_group=1, num_key_value_heads=4)),
    ):
        if not hasattr(T, cname):
            continue

        def make(cname=cname, mname=mname, extra=extra):
            cfg = getattr(T, cname)(**{**base, **extra})
            w = HFWrap(getattr(T, mname)(cfg), ["input_ids", "attention_mask"], ["logits"], {"use_cache": False})
            return w, _text(2), {}, None, f"{mname}({cname} tiny: {extra}), batch 2 with padding"
        _reg(f"moe_{mname.replace('ForCausalLM', '').lower()}", "moe", make)


# --------------------------------------------------------------------------
# Diffusion: diffusers' UNets, VAE and DiT from small configs
# --------------------------------------------------------------------------


class _Sample(nn.Module):
    """Calls a diffusers model and returns its `.sample` (or a method's)."""

    def __init__(self, m, method=None):
        super().__init__()
        self.m = m
        self.method = method

    def forward(self, *args):
        out = getattr(self.m, self.method)(*args) if self.method else self.m(*args)
        return out.sample


def _diffusion():
    try:
        import diffusers  # noqa: F401
    except Exception:  # noqa: BLE001 - no diffusers in this environment
        return

    def unet_cond():
        import diffusers as D
        return _Sample(D.UNet2DConditionModel(
            sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32, attention_head_dim=8,
            norm_num_groups=8))

    def unet2d():
        import diffusers as D
        return _Sample(D.UNet2DModel(
            sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
            down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
            norm_num_groups=8))

    def vae(method):
        import diffusers as D
        v = D.AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(16, 32), latent_channels=4,
                            down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                            up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), norm_num_groups=8)
        if method == "decode":
            return _Sample(v, "decode")

        class Encode(nn.Module):
            def __init__(self):
                super().__init__()
                self.v = v

            def forward(self, x):
                return self.v.encode(x).latent_dist.mean
        return Encode()

    def dit():
        import diffusers as D
        return _Sample(D.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                               num_layers=2, sample_size=8, patch_size=2,
                                               num_embeds_ada_norm=10))

    t = lambda *v: torch.tensor(list(v))  # noqa: E731
    for name, build, inputs, desc in (
        ("unet2d_condition", unet_cond, lambda: (torch.randn(1, 4, 16, 16), t(10), torch.randn(1, 5, 32)),
         "UNet2DConditionModel (Stable Diffusion's block types, 2 levels, cross attention to 5 tokens)"),
        ("unet2d", unet2d, lambda: (torch.randn(1, 3, 16, 16), t(3)),
         "UNet2DModel (DDPM's block types, self attention)"),
        ("vae_decode", lambda: vae("decode"), lambda: (torch.randn(1, 4, 8, 8),), "AutoencoderKL decoder"),
        ("vae_encode", lambda: vae("encode"), lambda: (torch.randn(1, 3, 16, 16),),
         "AutoencoderKL encoder (latent mean)"),
        ("dit", dit, lambda: (torch.randn(1, 4, 8, 8), t(3), t(1)),
         "DiTTransformer2DModel (adaptive layer norm zero, 2 layers)"),
    ):
        _reg(f"diffusers_{name}", "diffusion",
             lambda build=build, inputs=inputs, desc=desc: (build(), inputs, {}, None, desc))


FAMILIES = ["vision", "segmentation", "detection", "transformers", "nn", "exportdb", "dynamic", "state",
            "variants", "timm", "moe", "diffusion"]

_vision()
_segmentation()
_detection()
_transformers()
_nn()
_exportdb()
_dynamic()
_state()
_variants()
_timm()
_moe()
_diffusion()


def build(name, size=0):
    """(model, args, kwargs, dynamic_shapes, config). Seeds: the model after
    manual_seed(0), norm layers randomized from a generator seeded 1, the
    inputs after manual_seed(size); all-zero weights randomized from seed 2.
    `size` picks a dynamic entry's input set (0 is the one exported with)."""
    entry = REGISTRY[name]
    torch.manual_seed(0)
    model, inputs, kwargs, dyn, config = entry.make()
    model.train(entry.train)
    if entry.family != "exportdb":
        randomize_norms(model)
        randomize_zero_weights(model)
    torch.manual_seed(size)
    made = inputs(size) if entry.sizes > 1 else inputs()
    if kwargs is None:  # ExportDB: inputs() gives (args, kwargs)
        args, kwargs = made
    else:
        args = made
    return model, tuple(args), dict(kwargs), dyn, config


if __name__ == "__main__":
    import collections
    c = collections.Counter(e.family for e in REGISTRY.values())
    print(dict(c), sum(c.values()))
