# hostile: the name is a constant, not a function
stage_postprocess_inputs_to_gpu = 42
