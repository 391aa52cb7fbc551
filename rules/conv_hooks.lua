-- conv_hooks.lua -- predicates for the convolution rules.

-- is_depthwise(node): a grouped convolution with one input channel per group.
function is_depthwise(node)
  local groups = node.attrs.groups
  local channels = node.inputs[1].shape[2]
  return groups > 1 and groups == channels
end
