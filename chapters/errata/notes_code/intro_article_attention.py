# ruff: noqa
# The Introductory Article's PyTorch function (its lines 205-230), copied unchanged.
import torch
import torch.nn.functional as F
import math

def scaled_dot_product_attention(q, k, v, mask=None):
    # Shape of q, k, v: [batch_size, num_heads, seq_length, d_k]
    d_k = q.size(-1)
    
    # 1. Score calculation via dot product: Q * K^T
    # Transpose the last two dimensions to calculate matrix multiplication
    scores = torch.matmul(q, k.transpose(-2, -1))
    
    # 2. Scaling
    scores = scores / math.sqrt(d_k)
    
    # 3. Masking (for Masked Attention)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
        
    # 4. Probabilization by Softmax
    attention_weights = F.softmax(scores, dim=-1)
    
    # 5. Multiplication with Value matrix
    output = torch.matmul(attention_weights, v)
    
    return output, attention_weights
