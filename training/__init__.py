"""Pipeline stages that make a selector: pull feedback, build the dataset, fine-tune, export."""
