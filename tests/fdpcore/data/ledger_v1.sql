PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE fdp_meta (
	"key" VARCHAR(64) NOT NULL, 
	value VARCHAR(256) NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO fdp_meta VALUES('schema_version','1');
INSERT INTO fdp_meta VALUES('audit_head','9:452ec671f95abd7bf07d97f4565e0289d34ddc974900e66a189e0521583d8545');
CREATE TABLE fdp_datasets (
	dataset_id VARCHAR(200) NOT NULL, 
	epsilon_total VARCHAR(40) NOT NULL, 
	delta_total VARCHAR(40) NOT NULL, 
	created_at VARCHAR(40) NOT NULL, 
	updated_at VARCHAR(40) NOT NULL, 
	lock_counter INTEGER NOT NULL, 
	PRIMARY KEY (dataset_id)
);
INSERT INTO fdp_datasets VALUES('elec','12.0','0.0','2026-11-22T18:55:48.940711+00:00','2026-11-22T18:55:48.945945+00:00',4);
CREATE TABLE fdp_audit (
	seq INTEGER NOT NULL, 
	at VARCHAR(40) NOT NULL, 
	actor VARCHAR(200) NOT NULL, 
	host VARCHAR(200) NOT NULL, 
	event VARCHAR(40) NOT NULL, 
	dataset_id VARCHAR(200) NOT NULL, 
	release_id VARCHAR(200), 
	payload TEXT NOT NULL, 
	prev_hash VARCHAR(64) NOT NULL, 
	hash VARCHAR(64) NOT NULL, 
	PRIMARY KEY (seq)
);
INSERT INTO fdp_audit VALUES(1,'2026-11-22T18:55:48.943215+00:00','root','vm','dataset.created','elec',NULL,'{"delta_total": "0.0", "epsilon_total": "10.0", "source": "config proposal"}','0000000000000000000000000000000000000000000000000000000000000000','dd6e0a63aaaf29051b4a0afbbdaf45194066f8cd045ba6806e55d020f9d82c89');
INSERT INTO fdp_audit VALUES(2,'2026-11-22T18:55:48.949370+00:00','root','vm','budget.set','elec',NULL,'{"delta_total": "0.0", "epsilon_total": "12.0"}','dd6e0a63aaaf29051b4a0afbbdaf45194066f8cd045ba6806e55d020f9d82c89','53ac6b241f8ea254836807d7d3c0f6098a4db43762b74093d5bcdf36253d73f7');
INSERT INTO fdp_audit VALUES(3,'2026-11-22T18:55:48.957903+00:00','root','vm','release.reserved','elec','r-published','{"budget_splits": [{"delta": 0.0, "epsilon": 1.0, "name": "mean"}], "config_sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "delta": "0.0", "epsilon": "1.0", "mechanism": "iclp_qr", "provenance": {"code_version": "0.1.0"}, "sensitivity_formula": "sensitivity.mean.iclp_qr.exact_l2@1", "summary": "mean"}','53ac6b241f8ea254836807d7d3c0f6098a4db43762b74093d5bcdf36253d73f7','047d01bd55532baf67ae35d20ce22d2565ff36c8ce7d7df287d5e625a3e0c7a1');
INSERT INTO fdp_audit VALUES(4,'2026-11-22T18:55:48.962254+00:00','root','vm','release.noised','elec','r-published','{"from": "reserved", "to": "noised"}','047d01bd55532baf67ae35d20ce22d2565ff36c8ce7d7df287d5e625a3e0c7a1','a0924b5f98f3569602dbf6c759b28655317b7edf0af77239f138d516fbd40e7e');
INSERT INTO fdp_audit VALUES(5,'2026-11-22T18:55:48.966587+00:00','root','vm','release.published','elec','r-published','{"from": "noised", "public_sha256": "0c2b1eef7de852a36371b8ff24c46610709de62e1d4a3da71dadd1364f867b3c", "to": "published"}','a0924b5f98f3569602dbf6c759b28655317b7edf0af77239f138d516fbd40e7e','8508d7ccf71a027f6a7d9ba6479e2e2a0829b0741d7a7b598977d781da6d760a');
INSERT INTO fdp_audit VALUES(6,'2026-11-22T18:55:48.971722+00:00','root','vm','release.reserved','elec','r-cancelled','{"budget_splits": [{"delta": 0.0, "epsilon": 1.0, "name": "mean"}], "config_sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "delta": "0.0", "epsilon": "0.5", "mechanism": "iclp_qr", "provenance": {"code_version": "0.1.0"}, "sensitivity_formula": "sensitivity.mean.iclp_qr.exact_l2@1", "summary": "mean"}','8508d7ccf71a027f6a7d9ba6479e2e2a0829b0741d7a7b598977d781da6d760a','adf0f11e9525346dd4e59525738e81431cb0b0abc69f8ba3be440b6aef0496c6');
INSERT INTO fdp_audit VALUES(7,'2026-11-22T18:55:48.975349+00:00','root','vm','release.cancelled','elec','r-cancelled','{"from": "reserved", "to": "cancelled"}','adf0f11e9525346dd4e59525738e81431cb0b0abc69f8ba3be440b6aef0496c6','0ad170fc629699265a2068e920b1654c2f07808873f1ed4aa1ea6d9bd9057044');
INSERT INTO fdp_audit VALUES(8,'2026-11-22T18:55:48.979944+00:00','root','vm','release.reserved','elec','r-noised','{"budget_splits": [{"delta": 0.0, "epsilon": 1.0, "name": "mean"}], "config_sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "delta": "0.0", "epsilon": "0.25", "mechanism": "iclp_qr", "provenance": {"code_version": "0.1.0"}, "sensitivity_formula": "sensitivity.mean.iclp_qr.exact_l2@1", "summary": "mean"}','0ad170fc629699265a2068e920b1654c2f07808873f1ed4aa1ea6d9bd9057044','aae7e59d06c877f0470f27da6a6c27b2784f84116e5678f58c2437cdcb051669');
INSERT INTO fdp_audit VALUES(9,'2026-11-22T18:55:48.983752+00:00','root','vm','release.noised','elec','r-noised','{"from": "reserved", "to": "noised"}','aae7e59d06c877f0470f27da6a6c27b2784f84116e5678f58c2437cdcb051669','452ec671f95abd7bf07d97f4565e0289d34ddc974900e66a189e0521583d8545');
CREATE TABLE fdp_releases (
	release_id VARCHAR(200) NOT NULL, 
	dataset_id VARCHAR(200) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	epsilon VARCHAR(40) NOT NULL, 
	delta VARCHAR(40) NOT NULL, 
	config_sha256 VARCHAR(64) NOT NULL, 
	summary VARCHAR(40) NOT NULL, 
	mechanism VARCHAR(40) NOT NULL, 
	sensitivity_formula VARCHAR(120) NOT NULL, 
	budget_splits TEXT NOT NULL, 
	provenance TEXT NOT NULL, 
	internal TEXT NOT NULL, 
	public_json TEXT, 
	created_at VARCHAR(40) NOT NULL, 
	updated_at VARCHAR(40) NOT NULL, 
	PRIMARY KEY (release_id), 
	FOREIGN KEY(dataset_id) REFERENCES fdp_datasets (dataset_id)
);
INSERT INTO fdp_releases VALUES('r-published','elec','published','1.0','0.0','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','mean','iclp_qr','sensitivity.mean.iclp_qr.exact_l2@1','[{"name": "mean", "epsilon": 1.0, "delta": 0.0}]','{"code_version": "0.1.0"}','{"counts": {"n_clipped": 3}}','{"manifest": {"release_id": "r-published"}, "files": {}}','2026-11-22T18:55:48.953263+00:00','2026-11-22T18:55:48.964337+00:00');
INSERT INTO fdp_releases VALUES('r-cancelled','elec','cancelled','0.5','0.0','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','mean','iclp_qr','sensitivity.mean.iclp_qr.exact_l2@1','[{"name": "mean", "epsilon": 1.0, "delta": 0.0}]','{"code_version": "0.1.0"}','{"counts": {"n_clipped": 3}}',NULL,'2026-11-22T18:55:48.968565+00:00','2026-11-22T18:55:48.974314+00:00');
INSERT INTO fdp_releases VALUES('r-noised','elec','noised','0.25','0.0','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','mean','iclp_qr','sensitivity.mean.iclp_qr.exact_l2@1','[{"name": "mean", "epsilon": 1.0, "delta": 0.0}]','{"code_version": "0.1.0"}','{"counts": {"n_clipped": 3}}',NULL,'2026-11-22T18:55:48.977218+00:00','2026-11-22T18:55:48.982575+00:00');
CREATE INDEX ix_fdp_releases_dataset_id ON fdp_releases (dataset_id);
COMMIT;
