# hostile: takes two parameters where the schema passes six


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output):
    pass
