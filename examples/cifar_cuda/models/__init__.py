from .resnet import ResNet18
from .layers import *
